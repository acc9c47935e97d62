"""Client quotas and dynamic broker configs through Apache Kafka's own kafka-configs
(org.apache.kafka.tools.ConfigCommand, unmodified, in one JVM): client, user and (user, client)
quotas and their defaults; the broker default and one broker. Then enforcement, as Kafka since
KIP-219: a producer at producer_byte_rate = 1 MiB/s is held to it (its acknowledged bytes per
second over seconds 5-25 within 10 %) while an unthrottled producer on the same broker is not
slowed; a legacy consumer (kafka-python speaking Fetch v2) under consumer_byte_rate is held too;
throttle_time_ms is 0 when nothing is throttled.

Run as a script (`python3 tests/clients/test_admin_quotas.py --bootstrap HOST:PORT`) it measures
the producer against any broker whose quota was set the same way: bench/scripts/quota-accuracy.sh
uses that for the Kafka 4.1.1 figure beside Skiff's."""

import re
import socket
import struct
import sys
import threading
import time

import pytest

QUOTA_BYTES_PER_S = 1048576
RECORD_BYTES = 1000
MEASURE_FROM_S, MEASURE_TO_S = 5, 25
NODE_ID = 7
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
QUOTA_PRODUCER = "quota-producer"
FREE_PRODUCER = "free-producer"
LEGACY_CONSUMER = "legacy-consumer"
LEGACY_QUOTA_BYTES_PER_S = 102400
LEGACY_TOPIC_BYTES = 3_000_000


def acked_rate(bootstrap, topic, client_id, seconds, measure_from, measure_to):
    """Produces RECORD_BYTES records as fast as the broker lets a librdkafka producer (which honours
    throttle_time_ms as well) for `seconds`; returns the acknowledged payload bytes per second
    between `measure_from` and `measure_to` seconds after the start."""
    from confluent_kafka import Producer

    acked = []
    started = time.monotonic()
    # Batches of at most 16 KiB (the Java producer's batch.size): a request is a small part of a
    # second's quota, as in Kafka's own quota tests; librdkafka's default (1 MB batches once the
    # producer is held back) makes each request a whole second's worth.
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                         "acks": 1, "queue.buffering.max.kbytes": 4096, "batch.size": 16384})

    def delivered(error, message):
        if error is None:
            acked.append((time.monotonic() - started, len(message.value())))

    value = b"q" * RECORD_BYTES
    while time.monotonic() - started < seconds:
        try:
            producer.produce(topic, value, partition=0, on_delivery=delivered)
        except BufferError:
            producer.poll(0.02)
        producer.poll(0)
    producer.purge()
    producer.flush(5)
    window = measure_to - measure_from
    return sum(size for at, size in acked if measure_from <= at < measure_to) / window


def fetch_throttle_ms(bootstrap, client_id, topic):
    """One Fetch v4 of partition 0 of `topic` with `client_id`; the response's throttle_time_ms."""
    host, port = bootstrap.rsplit(":", 1)
    name = topic.encode()
    body = struct.pack(">iiiib", -1, 0, 0, 1048576, 0)
    body += struct.pack(">i", 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 1048576)
    client = client_id.encode()
    header = struct.pack(">hhih", 1, 4, 1, len(client)) + client
    frame = header + body
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _read(sock, 4))[0]
        response = _read(sock, size)
    return struct.unpack(">i", response[4:8])[0]


def _read(sock, count):
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise AssertionError("connection closed")
        data += chunk
    return data


@pytest.fixture(scope="module")
def quota_broker(java_classes, tmp_path_factory):
    from conftest import Broker
    from java_programs import run_tools

    broker = Broker(str(tmp_path_factory.mktemp("skiff-quotas")),
                    (f"node.id={NODE_ID}", "skiff.metrics.listener=127.0.0.1:0",
                     "max.connections=5000")).start()
    bs = ["--bootstrap-server", broker.bootstrap]
    commands = {
        "producer_quota": [CONFIGS, *bs, "--alter", "--entity-type", "clients", "--entity-name", QUOTA_PRODUCER,
                           "--add-config", f"producer_byte_rate={QUOTA_BYTES_PER_S}"],
        "legacy_quota": [CONFIGS, *bs, "--alter", "--entity-type", "clients", "--entity-name", LEGACY_CONSUMER,
                         "--add-config", f"consumer_byte_rate={LEGACY_QUOTA_BYTES_PER_S}"],
        "user_client_quota": [CONFIGS, *bs, "--alter", "--entity-type", "users", "--entity-name", "alice",
                              "--entity-type", "clients", "--entity-name", "app",
                              "--add-config", "request_percentage=50,consumer_byte_rate=2048"],
        "user_default_quota": [CONFIGS, *bs, "--alter", "--entity-type", "users", "--entity-default",
                               "--add-config", "controller_mutation_rate=100"],
        "client_default_quota": [CONFIGS, *bs, "--alter", "--entity-type", "clients", "--entity-default",
                                 "--add-config", "request_percentage=400"],
        "describe_client": [CONFIGS, *bs, "--describe", "--entity-type", "clients", "--entity-name", QUOTA_PRODUCER],
        "describe_user_client": [CONFIGS, *bs, "--describe", "--entity-type", "users", "--entity-name", "alice",
                                 "--entity-type", "clients", "--entity-name", "app"],
        "describe_users": [CONFIGS, *bs, "--describe", "--entity-type", "users", "--entity-default"],
        "temp_quota": [CONFIGS, *bs, "--alter", "--entity-type", "clients", "--entity-name", "temp",
                       "--add-config", "producer_byte_rate=1000"],
        "temp_quota_delete": [CONFIGS, *bs, "--alter", "--entity-type", "clients", "--entity-name", "temp",
                              "--delete-config", "producer_byte_rate"],
        "describe_temp": [CONFIGS, *bs, "--describe", "--entity-type", "clients", "--entity-name", "temp"],
        "bad_quota": [CONFIGS, *bs, "--alter", "--entity-type", "clients", "--entity-name", "bad",
                      "--add-config", "producer_byte_rate=-5"],
        "broker_default": [CONFIGS, *bs, "--alter", "--entity-type", "brokers", "--entity-default",
                           "--add-config", "max.connections=4000"],
        "broker_one": [CONFIGS, *bs, "--alter", "--entity-type", "brokers", "--entity-name", NODE_ID,
                       "--add-config", "max.connections=3000"],
        "describe_broker_default": [CONFIGS, *bs, "--describe", "--entity-type", "brokers", "--entity-default"],
        "describe_broker": [CONFIGS, *bs, "--describe", "--entity-type", "brokers", "--entity-name", NODE_ID],
        "broker_static_key": [CONFIGS, *bs, "--alter", "--entity-type", "brokers", "--entity-name", NODE_ID,
                              "--add-config", "log.dirs=/elsewhere"],
        "broker_one_delete": [CONFIGS, *bs, "--alter", "--entity-type", "brokers", "--entity-name", NODE_ID,
                              "--delete-config", "max.connections"],
        "describe_broker_all": [CONFIGS, *bs, "--describe", "--entity-type", "brokers", "--entity-name", NODE_ID,
                                "--all"],
    }
    try:
        runs = dict(zip(commands, run_tools(java_classes, list(commands.values()))))
        yield broker, runs
    finally:
        broker.stop()


def ok(runs, name):
    status, out, err = runs[name]
    assert status == 0, f"{name} exited {status}:\n{out}\n{err}"
    return out


def test_kafka_configs_client_and_user_quotas(quota_broker):
    _, runs = quota_broker
    for name in ("producer_quota", "legacy_quota", "user_client_quota", "user_default_quota",
                 "client_default_quota", "temp_quota", "temp_quota_delete"):
        ok(runs, name)
    described = ok(runs, "describe_client")
    assert f"producer_byte_rate={QUOTA_BYTES_PER_S}" in described, described
    pair = ok(runs, "describe_user_client")
    assert "request_percentage=50" in pair and "consumer_byte_rate=2048" in pair, pair
    users = ok(runs, "describe_users")
    assert "controller_mutation_rate=100" in users and "default" in users.lower(), users
    assert "producer_byte_rate" not in ok(runs, "describe_temp")
    status, out, err = runs["bad_quota"]
    assert status != 0 and "producer_byte_rate" in out + err, (status, out, err)


def test_kafka_configs_broker_default_and_one_broker(quota_broker):
    _, runs = quota_broker
    ok(runs, "broker_default")
    ok(runs, "broker_one")
    default = ok(runs, "describe_broker_default")
    assert re.search(r"max\.connections=4000 sensitive=false synonyms=\{DYNAMIC_DEFAULT_BROKER_CONFIG:max\.connections=4000\}",
                     default), default
    one = ok(runs, "describe_broker")
    assert re.search(r"max\.connections=3000 sensitive=false synonyms=\{DYNAMIC_BROKER_CONFIG:max\.connections=3000, "
                     r"DYNAMIC_DEFAULT_BROKER_CONFIG:max\.connections=4000, STATIC_BROKER_CONFIG:max\.connections=5000",
                     one), one
    status, out, err = runs["broker_static_key"]
    assert status != 0 and "log.dirs" in out + err, (status, out, err)
    ok(runs, "broker_one_delete")
    everything = ok(runs, "describe_broker_all")
    assert re.search(r"max\.connections=4000 sensitive=false synonyms=\{DYNAMIC_DEFAULT_BROKER_CONFIG", everything), everything


def test_producer_held_to_its_quota_and_others_not_slowed(quota_broker):
    from clients import ck_produce
    from conftest import messages

    broker, _ = quota_broker
    ck_produce(broker.bootstrap, "quota-topic", messages(1))
    assert fetch_throttle_ms(broker.bootstrap, FREE_PRODUCER, "quota-topic") == 0
    free = {}

    def unthrottled():
        time.sleep(8)
        free["rate"] = acked_rate(broker.bootstrap, "quota-free", FREE_PRODUCER, 4, 1, 4)

    ck_produce(broker.bootstrap, "quota-free", messages(1))
    thread = threading.Thread(target=unthrottled)
    thread.start()
    rate = acked_rate(broker.bootstrap, "quota-topic", QUOTA_PRODUCER, MEASURE_TO_S, MEASURE_FROM_S, MEASURE_TO_S)
    thread.join()
    print(f"\nquota {QUOTA_BYTES_PER_S} B/s: producer acked {rate:.0f} B/s over seconds "
          f"{MEASURE_FROM_S}-{MEASURE_TO_S} ({rate / QUOTA_BYTES_PER_S:.3f} of the quota); "
          f"unthrottled producer beside it {free['rate']:.0f} B/s")
    assert abs(rate - QUOTA_BYTES_PER_S) <= 0.1 * QUOTA_BYTES_PER_S, rate
    assert free["rate"] > 2 * QUOTA_BYTES_PER_S, free
    assert fetch_throttle_ms(broker.bootstrap, FREE_PRODUCER, "quota-topic") == 0


def test_legacy_consumer_held_to_its_quota(quota_broker):
    from kafka import KafkaConsumer, TopicPartition
    from clients import ck_produce

    broker, _ = quota_broker
    value = "l" * 10000
    ck_produce(broker.bootstrap, "quota-legacy", [(None, value)] * (LEGACY_TOPIC_BYTES // len(value)))
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, client_id=LEGACY_CONSUMER,
                             api_version=(0, 10, 1), enable_auto_commit=False, fetch_max_bytes=262144,
                             max_partition_fetch_bytes=262144)
    partition = TopicPartition("quota-legacy", 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    consumed = 0
    started = time.monotonic()
    seconds = 12
    while time.monotonic() - started < seconds:
        for records in consumer.poll(timeout_ms=200).values():
            consumed += sum(len(record.value) for record in records)
    consumer.close()
    # Held: at most the 11 windows' worth a fresh sensor lets through plus the measured time at
    # the quota, far below the 3 MB an unthrottled consumer reads in a moment.
    bound = LEGACY_QUOTA_BYTES_PER_S * (seconds + 11)
    print(f"\nlegacy consumer (Fetch v3) at consumer_byte_rate {LEGACY_QUOTA_BYTES_PER_S}: "
          f"{consumed} bytes in {seconds} s (bound {bound})")
    assert 0 < consumed <= bound, consumed
    # Its Fetch v3 requests were throttled (their answers said so, and were held).
    from test_metrics import scrape, value
    _, body = scrape(broker)
    series = f'skiff_client_quota_throttled_requests{{user="",client_id="{LEGACY_CONSUMER}",key="consumer_byte_rate"}}'
    assert value(body, series) > 0, body


def alter_client_quota(bootstrap, client_id, key, value):
    """AlterClientQuotas v0 (raw: no Python client has it) setting `key` of client id `client_id`;
    returns the entry's error code."""
    def string(text):
        return struct.pack(">h", len(text)) + text.encode()

    body = struct.pack(">i", 1)
    body += struct.pack(">i", 1) + string("client-id") + string(client_id)
    body += struct.pack(">i", 1) + string(key) + struct.pack(">db", float(value), 0)
    body += struct.pack(">b", 0)
    frame = struct.pack(">hhi", 49, 0, 1) + string("propagation") + body
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _read(sock, 4))[0]
        response = _read(sock, size)
    # correlation id, throttle, entry count, then the first entry's error code
    return struct.unpack(">h", response[12:14])[0]


def alter_broker_default(bootstrap, key, value):
    """IncrementalAlterConfigs v0 (raw: librdkafka refuses the empty broker name) setting `key` for
    every broker (the cluster default); returns the resource's error code."""
    def string(text):
        return struct.pack(">h", len(text)) + text.encode()

    body = struct.pack(">i", 1) + struct.pack(">b", 4) + string("")
    body += struct.pack(">i", 1) + string(key) + struct.pack(">b", 0) + string(value)
    body += struct.pack(">b", 0)
    frame = struct.pack(">hhi", 44, 0, 1) + string("propagation") + body
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _read(sock, 4))[0]
        response = _read(sock, size)
    # correlation id, throttle, response count, then the first response's error code
    return struct.unpack(">h", response[12:14])[0]


def percentiles(samples_ms):
    ordered = sorted(samples_ms)
    return {"median": ordered[len(ordered) // 2], "p90": ordered[int(len(ordered) * 0.9)], "max": ordered[-1]}


PROPAGATION_CHANGES = 20
PROPAGATION_BOUND_S = 1.0


def test_quota_and_dynamic_config_propagation(etcd):
    """20 quota changes and 20 broker-default changes through broker 0 of 3, each timed from the
    answer until broker 2 shows it (its /metrics for the quota, its DescribeConfigs for the config)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
    from test_cluster import SkiffCluster, metrics

    cluster = SkiffCluster(etcd, 3).start()
    try:
        writer, reader = cluster.brokers[0], cluster.brokers[2]
        quota_ms, config_ms = [], []
        for change in range(1, PROPAGATION_CHANGES + 1):
            value = 1000 * change
            assert alter_client_quota(writer.bootstrap, "propagation", "producer_byte_rate", value) == 0
            answered = time.monotonic()
            series = 'skiff_client_quota{user="",client_id="propagation",key="producer_byte_rate"}'
            while metrics(reader).get(series) != value:
                assert time.monotonic() - answered < PROPAGATION_BOUND_S, f"quota change {change} not seen"
                time.sleep(0.002)
            quota_ms.append((time.monotonic() - answered) * 1000)
        reader_admin = AdminClient({"bootstrap.servers": reader.bootstrap})
        reader_resource = ConfigResource(ResourceType.BROKER, "2")
        for change in range(1, PROPAGATION_CHANGES + 1):
            value = str(1000 + change)
            assert alter_broker_default(writer.bootstrap, "max.connections", value) == 0
            answered = time.monotonic()
            while reader_admin.describe_configs([reader_resource])[reader_resource].result(30)["max.connections"].value != value:
                assert time.monotonic() - answered < PROPAGATION_BOUND_S, f"config change {change} not seen"
            config_ms.append((time.monotonic() - answered) * 1000)
        print(f"\npropagation over {PROPAGATION_CHANGES} changes, broker 0 -> broker 2 (ms): "
              f"quota {percentiles(quota_ms)}, dynamic config {percentiles(config_ms)}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    bootstrap = sys.argv[sys.argv.index("--bootstrap") + 1]
    topic = sys.argv[sys.argv.index("--topic") + 1] if "--topic" in sys.argv else "quota-topic"
    measured = acked_rate(bootstrap, topic, QUOTA_PRODUCER, MEASURE_TO_S, MEASURE_FROM_S, MEASURE_TO_S)
    print(f"{measured:.0f} {measured / QUOTA_BYTES_PER_S:.4f}")
