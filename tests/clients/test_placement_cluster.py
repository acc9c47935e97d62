"""Placement live in a cluster (issue 17): 3 brokers on the shared etcd, a topic whose 8 partitions
(replication factor 1) all start on broker 0, idempotent acks=all producers writing every
partition. The controller's shedder (a 2 s cycle here) sees broker 0 carry all the bytes in and
moves bundles away: the target is added as a replica, catches up, takes the leadership and broker
0's replica is dropped. The producers keep going and lose nothing; the clients see only retriable
errors; afterwards every bundle is owned by the broker that leads its partitions, and
`skiff placement status` prints the same map. With `skiff.placement.shed.dry.run` the controller
shows the same plan and moves nothing."""

import json
import subprocess
import threading
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import BROKER_BIN
from test_cluster import METRICS, SkiffCluster, dump_logs, metrics, wait_for
from test_replication import ready

TOPIC = "skewed"
PARTITIONS = 8
RECORD_BYTES = 1024
SETTINGS = ("min.insync.replicas=1", "replica.lag.time.max.ms=5000", "replica.fetch.wait.max.ms=200",
            "skiff.placement.shed.interval.ms=2000", "skiff.placement.bundle.cooldown.ms=600000",
            "skiff.placement.shed.moves.max=2")
# Errors a producer retries by itself while a leadership moves.
RETRIABLE = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
             KafkaError._TRANSPORT, KafkaError.REQUEST_TIMED_OUT}


def cluster_of_3(etcd, settings):
    cluster = SkiffCluster(etcd, 3, settings).start()
    try:
        yield ready(cluster)
    finally:
        dump_logs(cluster)
        cluster.stop()


@pytest.fixture
def shedding3(etcd):
    yield from cluster_of_3(etcd, SETTINGS)


@pytest.fixture
def dry_run3(etcd):
    yield from cluster_of_3(etcd, SETTINGS + ("skiff.placement.shed.dry.run=true",))


def bundles_of(broker):
    address = [METRICS.search(line).group(1) for line in broker.log_lines if METRICS.search(line)][-1]
    with urllib.request.urlopen(f"http://{address}/placement/bundles", timeout=5) as response:
        return address, json.loads(response.read())


class Writers:
    """One idempotent acks=all producer over every partition, at a steady rate, recording each
    acknowledged (partition, offset) → value and every error it was told of."""

    def __init__(self, bootstrap):
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "error_cb": self.on_error})
        self.acked = {}
        self.errors = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def on_error(self, error):
        self.errors.append(error.code())

    def on_delivery(self, error, message):
        if error is not None:
            self.errors.append(error.code())
        else:
            self.acked[(message.partition(), message.offset())] = message.value()

    def run(self):
        sequence = 0
        while not self.stopping.is_set():
            for partition in range(PARTITIONS):
                value = f"{sequence:08d}".encode().ljust(RECORD_BYTES, b".")
                self.producer.produce(TOPIC, value, partition=partition, on_delivery=self.on_delivery)
                sequence += 1
            self.producer.poll(0)
            time.sleep(0.002)
        self.producer.flush(30)

    def stop(self):
        self.stopping.set()
        self.thread.join(60)


def read_partition(bootstrap, partition, end):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, partition, 0)])
    seen = {}
    deadline = time.monotonic() + 60
    while len(seen) < end and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen[message.offset()] = message.value()
    consumer.close()
    return seen


def leaders(bootstrap):
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
    return {p.id: (p.leader, sorted(p.replicas)) for p in metadata.topics[TOPIC].partitions.values()}


def skew_onto_broker_0(cluster, bootstrap):
    """The topic, every partition on broker 0 alone, and its 4 bundle records written."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replica_assignment=[[0]] * PARTITIONS)])[TOPIC].result(30)
    wait_for(lambda: all(leader == 0 for leader, _ in leaders(bootstrap).values()), 15, "broker 0 leads all")
    wait_for(lambda: len([b for b in bundles_of(cluster.brokers[0])[1]["bundles"]
                          if b["namespace"] == TOPIC and b["state"] != "local"]) == 4,
             15, "the controller wrote the topic's 4 bundle records")


def the_controller(cluster, bootstrap):
    return cluster.brokers[AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).controller_id]


def test_a_shedding_cycle_moves_load_off_the_busy_broker_and_nothing_is_lost(shedding3):
    cluster = shedding3
    bootstrap = cluster.brokers[1].bootstrap
    skew_onto_broker_0(cluster, bootstrap)
    writers = Writers(bootstrap)
    try:
        wait_for(lambda: len(writers.acked) > 2000, 30, "first acknowledgements")

        def moved():
            return any(leader != 0 for leader, _ in leaders(bootstrap).values())
        # Reports every 5 s, a 2 s cycle, two high hits: well within 40 s.
        wait_for(moved, 40, "a partition led by another broker after a shedding cycle")

        def settled():
            view = bundles_of(cluster.brokers[0])[1]["bundles"]
            mine = [b for b in view if b["namespace"] == TOPIC]
            return all(b["state"] == "owned" for b in mine) and any(b["last_move"] for b in mine)
        wait_for(settled, 40, "the started moves finished")
        acked = len(writers.acked)
        wait_for(lambda: len(writers.acked) > acked + 2000, 30, "acknowledgements after the moves")
    finally:
        writers.stop()
    assert not [e for e in writers.errors if e not in RETRIABLE], writers.errors[:10]

    # The bundle map agrees with the partition leaders, as every broker sees it.
    final = leaders(bootstrap)
    for broker in cluster.brokers:
        address, view = bundles_of(broker)
        for bundle in (b for b in view["bundles"] if b["namespace"] == TOPIC):
            assert bundle["state"] == "owned", bundle
            assert bundle["partitions_led_by_owner"] == bundle["partitions"], bundle
    moved_partitions = [p for p, (leader, replicas) in final.items() if leader != 0]
    assert moved_partitions, final
    for partition in moved_partitions:
        leader, replicas = final[partition]
        assert replicas == [leader], ("the old replica was dropped", partition, final[partition])

    # Nothing acknowledged is lost.
    for partition in range(PARTITIONS):
        mine = {offset: value for (p, offset), value in writers.acked.items() if p == partition}
        if not mine:
            continue
        seen = read_partition(bootstrap, partition, max(mine) + 1)
        missing = [offset for offset, value in mine.items() if seen.get(offset) != value]
        assert not missing, (partition, missing[:10])

    # The operator's table shows the same map, with the controller's last cycle.
    controller = the_controller(cluster, bootstrap)
    address, _ = bundles_of(controller)
    status = subprocess.run([BROKER_BIN, "placement", "status", "--metrics", address],
                            capture_output=True, text=True, timeout=30)
    assert status.returncode == 0, status.stderr
    assert f"{TOPIC}/0x00000000_" in status.stdout, status.stdout
    assert "Last shedding cycle" in status.stdout, status.stdout

    values = metrics(controller)
    assert values["skiff_placement_moves_total"] >= 1, values
    assert values["skiff_placement_ping_pong_total"] == 0, values
    assert values['skiff_placement_broker_load_bytes_per_second{broker="0"}'] >= 0, values


def test_a_dry_run_plans_and_shows_moves_without_moving_anything(dry_run3):
    cluster = dry_run3
    bootstrap = cluster.brokers[1].bootstrap
    skew_onto_broker_0(cluster, bootstrap)
    writers = Writers(bootstrap)
    try:
        controller = the_controller(cluster, bootstrap)

        def planned():
            cycle = bundles_of(controller)[1]["cycle"]
            return cycle and cycle["dry_run"] and any(m["outcome"] == "dry run" for m in cycle["moves"])
        wait_for(planned, 40, "a dry-run plan with a move")
        time.sleep(3)  # a cycle later: still nothing moved
        assert all(leader == 0 for leader, _ in leaders(bootstrap).values())
        view = bundles_of(controller)[1]
        assert all(b["state"] == "owned" and b["owner"] == 0 for b in view["bundles"] if b["namespace"] == TOPIC)
        values = metrics(controller)
        assert values["skiff_placement_planned_moves_total"] >= 1, values
        assert values["skiff_placement_moves_total"] == 0, values
    finally:
        writers.stop()
    assert not [e for e in writers.errors if e not in RETRIABLE], writers.errors[:10]
