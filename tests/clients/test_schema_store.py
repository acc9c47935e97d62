"""A schema registry's store as Confluent's Schema Registry and Karapace keep it (issue 37): the
`_schemas` topic with one partition and cleanup.policy=compact, checked at start the way
Confluent's KafkaStore.verifySchemaTopic checks it (DescribeConfigs says exactly `compact`, one
partition), written one acks=all record at a time with the registry's JSON keys and values
(schemas, a subject's compatibility config changed twice, a soft-deleted version, a hard-deleted
one as a tombstone, the NOOP record every registry start writes), the broker restarted, and the
store rebuilt from offset 0 as the registry's reader thread rebuilds it: the latest value per key,
a tombstone removing its key.

Once as a registry creates the topic (cleanup.policy alone: nothing is cleaned, every record reads
back as written), and once with the cleaner running on it (ecosystem.FAST_CLEANING): every record
left is the one written at its offset, no key but NOOP is left twice, and the rebuilt store is
the same. Neither registry installs on these machines (Karapace is not on PyPI, Confluent's
registry not on Maven Central), so this drives their store protocol with confluent-kafka."""

import json
import time

import pytest
from confluent_kafka import Producer

from ecosystem import (FAST_CLEANING, FAST_SEGMENT_MS, SingleNode, assert_compacted_config, create_topic,
                       partition_count, read_partition, wait_for)

TOPIC = "_schemas"
NOOP_KEY = {"keytype": "NOOP", "magic": 0}
CLEANED_WITHIN_S = 60


@pytest.fixture
def target():
    node = SingleNode()
    yield node
    node.stop()


def encode(document):
    # The registry's serializer: Jackson's compact JSON.
    return None if document is None else json.dumps(document, separators=(",", ":")).encode()


def schema_key(subject, version):
    return {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}


def schema_value(subject, version, schema_id, fields, deleted=False):
    schema = {"type": "record", "name": subject.replace("-", "_"), "fields": fields}
    return {"subject": subject, "version": version, "id": schema_id, "schema": json.dumps(schema),
            "deleted": deleted}


def registry_history():
    """[(key, value)] in the order a registry writes them while users register, reconfigure and
    delete schemas: value None is a hard delete (a tombstone)."""
    history = [(NOOP_KEY, None), ({"keytype": "CONFIG", "subject": None, "magic": 0},
                                  {"compatibilityLevel": "BACKWARD"})]
    schema_id = 0
    for subject in ("orders-value", "payments-value", "users-value"):
        fields = []
        for version in range(1, 4):
            schema_id += 1
            fields = fields + [{"name": f"f{version}", "type": "string", "default": ""}]
            history.append((schema_key(subject, version), schema_value(subject, version, schema_id, fields)))
    history += [
        ({"keytype": "CONFIG", "subject": "orders-value", "magic": 0}, {"compatibilityLevel": "FULL"}),
        ({"keytype": "CONFIG", "subject": "orders-value", "magic": 0}, {"compatibilityLevel": "NONE"}),
        # A soft delete rewrites the version with deleted=true; a hard delete then tombstones it.
        (schema_key("payments-value", 1), schema_value("payments-value", 1, 4, [
            {"name": "f1", "type": "string", "default": ""}], deleted=True)),
        (schema_key("users-value", 2), schema_value("users-value", 2, 8, [
            {"name": "f1", "type": "string", "default": ""}, {"name": "f2", "type": "string", "default": ""}],
            deleted=True)),
        (schema_key("users-value", 2), None),
        ({"keytype": "DELETE_SUBJECT", "subject": "payments-value", "magic": 0},
         {"subject": "payments-value", "version": 3}),
        (NOOP_KEY, None),
    ]
    return history


class StoreWriter:
    """The registry's producer: acks=all, each write waited for before the next (KafkaStore.put)."""

    def __init__(self, bootstrap):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        self.written = []  # [(offset, key bytes, value bytes)]

    def put(self, key, value):
        acked = []
        self.producer.produce(TOPIC, key=encode(key), value=encode(value), partition=0,
                              on_delivery=lambda error, message: acked.append((error, message)))
        self.producer.flush(30)
        assert acked and acked[0][0] is None, f"write of {key} not acknowledged: {acked}"
        self.written.append((acked[0][1].offset(), encode(key), encode(value)))


def rebuild(records):
    """The registry's reader: the latest value per key, a tombstone removing the key."""
    store = {}
    for _offset, key, value in records:
        if value is None:
            store.pop(key, None)
        else:
            store[key] = value
    return store


def verify_schema_topic(bootstrap):
    """What KafkaStore.verifySchemaTopic refuses to start without."""
    assert partition_count(bootstrap, TOPIC) == 1
    assert_compacted_config(bootstrap, TOPIC)


def test_the_store_as_a_registry_creates_it_survives_a_restart(target):
    create_topic(target.bootstrap, TOPIC, config={"cleanup.policy": "compact"})
    verify_schema_topic(target.bootstrap)
    writer = StoreWriter(target.bootstrap)
    for key, value in registry_history():
        writer.put(key, value)
    assert [offset for offset, _, _ in writer.written] == list(range(len(writer.written)))

    target.restart()
    verify_schema_topic(target.bootstrap)
    records = read_partition(target.bootstrap, TOPIC)
    # Nothing here makes the log cleanable (one segment, the default ratio): all of it reads back.
    assert records == writer.written
    assert rebuild(records) == rebuild(writer.written)


def duplicated_keys(records):
    keys = [key for _offset, key, _value in records if key != encode(NOOP_KEY)]
    return sorted({key for key in keys if keys.count(key) > 1})


def test_the_cleaned_store_rebuilds_the_latest_schemas_after_a_restart(target):
    create_topic(target.bootstrap, TOPIC, config=dict(FAST_CLEANING, **{"delete.retention.ms": "2000"}))
    verify_schema_topic(target.bootstrap)
    writer = StoreWriter(target.bootstrap)
    history = registry_history()
    # Three rounds a segment age apart, so the history spans segments the cleaner may clean.
    for round_start in range(0, len(history), len(history) // 3 + 1):
        for key, value in history[round_start:round_start + len(history) // 3 + 1]:
            writer.put(key, value)
        time.sleep(FAST_SEGMENT_MS / 1000 + 0.2)
    truth = rebuild(writer.written)
    at_offset = {offset: (key, value) for offset, key, value in writer.written}

    def cleaned():
        # A registry start writes a NOOP: each one rolls the aged segment so it can be cleaned.
        writer.put(NOOP_KEY, None)
        at_offset.update({offset: (key, value) for offset, key, value in writer.written[-1:]})
        records = read_partition(target.bootstrap, TOPIC)
        return records if not duplicated_keys(records) else None

    records = wait_for(cleaned, CLEANED_WITHIN_S, "every key but NOOP left once by the cleaner",
                       interval_s=FAST_SEGMENT_MS / 1000 + 0.1)
    assert len(records) < len(writer.written)
    for offset, key, value in records:
        assert at_offset[offset] == (key, value), f"offset {offset} holds another record than was written"
    assert rebuild(records) == truth

    target.restart()
    verify_schema_topic(target.bootstrap)
    after = read_partition(target.bootstrap, TOPIC)
    for offset, key, value in after:
        assert at_offset[offset] == (key, value), f"after the restart offset {offset} holds another record"
    assert not duplicated_keys(after)
    assert rebuild(after) == truth
