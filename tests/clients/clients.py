"""Thin drivers for the real clients: kafka-python, confluent-kafka, kcat and kafka-node. Each
produces or consumes deterministic messages and returns what it saw, so a test can compare exactly
(every message once, in order, key and value intact)."""

import json
import pathlib
import subprocess
import time

NODE_DIR = pathlib.Path(__file__).resolve().parent / "node"
CONSUME_TIMEOUT_S = 30


# --- kafka-python -------------------------------------------------------------------------------

def kp_produce(bootstrap, topic, msgs, api_version=None, compression=None, partition=0, **extra):
    from kafka import KafkaProducer

    kwargs = {"bootstrap_servers": bootstrap, "acks": 1, "linger_ms": 5}
    if api_version is not None:
        kwargs["api_version"] = api_version
    if compression is not None:
        kwargs["compression_type"] = compression
    kwargs.update(extra)
    producer = KafkaProducer(**kwargs)
    futures = [producer.send(topic, key=key, value=value, partition=partition) for key, value in msgs]
    producer.flush(timeout=CONSUME_TIMEOUT_S)
    offsets = [future.get(timeout=CONSUME_TIMEOUT_S).offset for future in futures]
    producer.close()
    return offsets


def kp_consume(bootstrap, topic, count, api_version=None, offset=0, partition=0, **extra):
    from kafka import KafkaConsumer, TopicPartition

    kwargs = {"bootstrap_servers": bootstrap, "enable_auto_commit": False, "group_id": None}
    if api_version is not None:
        kwargs["api_version"] = api_version
    kwargs.update(extra)
    consumer = KafkaConsumer(**kwargs)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek(tp, offset)
    seen = []
    deadline = time.monotonic() + CONSUME_TIMEOUT_S
    while len(seen) < count and time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=500)
        for records in batch.values():
            seen.extend((record.offset, record.key, record.value) for record in records)
    consumer.close()
    return seen


# --- confluent-kafka ----------------------------------------------------------------------------

def ck_produce(bootstrap, topic, msgs, partition=0, **conf):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors = []

    def delivered(error, message):
        if error is not None:
            errors.append(error)

    for key, value in msgs:
        producer.produce(topic, key=key, value=value, partition=partition, on_delivery=delivered)
        producer.poll(0)
    remaining = producer.flush(CONSUME_TIMEOUT_S)
    assert remaining == 0, f"{remaining} messages not delivered"
    assert not errors, errors
    return len(msgs)


def ck_consume(bootstrap, topic, count, offset=0, partition=0, **conf):
    from confluent_kafka import Consumer, TopicPartition, KafkaError

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "skiff-test-unused",
        "enable.auto.commit": False,
        **conf,
    })
    consumer.assign([TopicPartition(topic, partition, offset)])
    seen, errors = [], []
    deadline = time.monotonic() + CONSUME_TIMEOUT_S
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            if message.error().code() != KafkaError._PARTITION_EOF:
                errors.append(message.error())
                if len(errors) > 3:
                    break
            continue
        seen.append((message.offset(), message.key(), message.value()))
    consumer.close()
    return seen, errors


# --- kcat ---------------------------------------------------------------------------------------

KCAT_LEGACY = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"]


def kcat_produce(bootstrap, topic, msgs, legacy=False, codec=None, partition=0, extra=()):
    args = ["kcat", "-b", bootstrap, "-P", "-t", topic, "-p", str(partition), "-K", "\t",
            "-X", "acks=1", *extra]
    if legacy:
        args += KCAT_LEGACY
    if codec:
        args += ["-z", codec]
    data = b"".join(key + b"\t" + value + b"\n" for key, value in msgs)
    subprocess.run(args, input=data, check=True, timeout=CONSUME_TIMEOUT_S, capture_output=True)


def kcat_consume(bootstrap, topic, count, legacy=False, offset="beginning", partition=0, extra=()):
    args = ["kcat", "-b", bootstrap, "-C", "-t", topic, "-p", str(partition), "-o", str(offset),
            "-c", str(count), "-e", "-f", "%o\t%k\t%s\n", *extra]
    if legacy:
        args += KCAT_LEGACY
    result = subprocess.run(args, check=True, timeout=CONSUME_TIMEOUT_S, capture_output=True)
    seen = []
    for line in result.stdout.split(b"\n"):
        if not line:
            continue
        offset_text, key, value = line.split(b"\t", 2)
        seen.append((int(offset_text), key, value))
    return seen, result.stderr.decode(errors="replace")


# --- kafka-node ---------------------------------------------------------------------------------

def node(command, **args):
    """Runs tests/clients/node/driver.js with a JSON argument; returns its JSON answer."""
    result = subprocess.run(
        ["node", str(NODE_DIR / "driver.js"), command, json.dumps(args)],
        capture_output=True, timeout=CONSUME_TIMEOUT_S + 15, text=True,
    )
    if result.returncode != 0:
        raise AssertionError(f"kafka-node {command} failed:\n{result.stdout}\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def expected(msgs, first_offset=0):
    return [(first_offset + index, key, value) for index, (key, value) in enumerate(msgs)]


# --- groups -------------------------------------------------------------------------------------

GROUP_SESSION_MS = 6000


def kp_group_consumer(bootstrap, topic, group, api_version=None, **extra):
    """A kafka-python consumer in `group`, subscribed to `topic`, committing by hand."""
    from kafka import KafkaConsumer

    kwargs = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": GROUP_SESSION_MS,
        "heartbeat_interval_ms": 1000,
    }
    if api_version is not None:
        kwargs["api_version"] = api_version
    kwargs.update(extra)
    consumer = KafkaConsumer(**kwargs)
    consumer.subscribe([topic])
    return consumer


def kp_group_poll(consumer, count, timeout_s=CONSUME_TIMEOUT_S):
    """Polls until `count` records (or the timeout); returns (partition, offset, key, value)."""
    seen = []
    deadline = time.monotonic() + timeout_s
    while len(seen) < count and time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=500)
        for tp, records in batch.items():
            seen.extend((tp.partition, r.offset, r.key, r.value) for r in records)
    return seen


def ck_group_consumer(bootstrap, topic, group, **conf):
    """A confluent-kafka consumer in `group`, subscribed to `topic`, committing by hand."""
    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": GROUP_SESSION_MS,
        "heartbeat.interval.ms": 1000,
        **conf,
    })
    consumer.subscribe([topic])
    return consumer


def ck_group_poll(consumer, count, timeout_s=CONSUME_TIMEOUT_S):
    seen = []
    deadline = time.monotonic() + timeout_s
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            raise AssertionError(f"consumer error: {message.error()}")
        seen.append((message.partition(), message.offset(), message.key(), message.value()))
    return seen
