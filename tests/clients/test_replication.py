"""Replication across 3 brokers on the shared etcd (issue 16): an RF 3 topic written by an
idempotent acks=all confluent-kafka producer and a legacy kafka-python producer (Produce v2) while
the partition leader is SIGKILLed and restarted; afterwards every acknowledged record is read at
its acknowledged offset through each broker by a modern and a legacy (down-converted) consumer,
the idempotent ones exactly once, and every replica holds the same batches (offsets, CRCs, leader
epochs). With 2 of 3 brokers down acks=all gets NOT_ENOUGH_REPLICAS (19) and nothing is lost.
A SIGTERMed leader hands its leadership over before it exits (controlled shutdown), so producers
fail over in moments rather than a session timeout.

`SKIFF_REPLICATION_KILLS` sets the kill cycles (5 in CI; the soak in scripts/soak.sh runs 50+),
`SKIFF_SEED` the seed of the kill timing; both are printed."""

import base64
import glob
import json
import os
import random
import signal
import socket
import struct
import subprocess
import threading
import time
import traceback

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import SUMMARY_LINES
from test_cluster import SESSION_MS, SkiffCluster, agreed_controller, dump_logs, metrics, wait_for
from test_cluster_topics import produce_v3_error, produce_v3_frame

TOPIC = "replicated"
KILLS = int(os.environ.get("SKIFF_REPLICATION_KILLS", "5"))
SEED = int(os.environ.get("SKIFF_SEED", str(random.randrange(1 << 32))))
LAG_MS = 5000
REPLICA_SETTINGS = (f"replica.lag.time.max.ms={LAG_MS}", "min.insync.replicas=2",
                    "replica.fetch.wait.max.ms=200")
NOT_ENOUGH_REPLICAS = 19
RETRIABLE_COORDINATOR_ERRORS = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                KafkaError.COORDINATOR_NOT_AVAILABLE)
LEADER_NOT_AVAILABLE = 5


def start_replicated(etcd, settings):
    cluster = SkiffCluster(etcd, 3)
    cluster.brokers = [cluster._broker(i, cluster.dirs[i], settings) for i in range(3)]
    cluster.start()
    return cluster


def replicated_cluster(etcd, settings):
    """A fixture's body: 3 brokers with `settings`, ready; afterwards every broker is resumed (a
    stopped one would not see the SIGTERM), its log printed with SKIFF_TEST_DUMP_LOGS, and the
    cluster stopped."""
    cluster = start_replicated(etcd, settings)
    yield ready(cluster)
    for broker in cluster.running():
        broker.process.send_signal(signal.SIGCONT)
    dump_logs(cluster)
    cluster.stop()


@pytest.fixture
def replicated3(etcd):
    yield from replicated_cluster(etcd, REPLICA_SETTINGS)


@pytest.fixture
def rebalancing3(etcd):
    """As replicated3, with the controller's leader-imbalance check every second."""
    yield from replicated_cluster(etcd, REPLICA_SETTINGS + ("leader.imbalance.check.interval.seconds=1",))


# A follower's session (10 s) outlives its lag limit (2.5 s): only its leader can drop it.
SLOW_LAG_MS = 2500
SLOW_SETTINGS = ("broker.session.timeout.ms=10000", f"replica.lag.time.max.ms={SLOW_LAG_MS}",
                 "min.insync.replicas=2", "replica.fetch.wait.max.ms=200")


@pytest.fixture
def long_sessions3(etcd):
    yield from replicated_cluster(etcd, SLOW_SETTINGS)


def ready(cluster):
    agreed_controller(cluster)
    wait_for(lambda: len(AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
                         .list_topics(timeout=10).brokers) == 3, 10, "3 brokers in Metadata")
    return cluster


def describe(bootstrap, topic=TOPIC):
    """{partition: (leader, replicas, isr)} as `bootstrap` describes `topic`."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs))
            for p in metadata.topics[topic].partitions.values()}


def bootstraps(cluster):
    return ",".join(b.bootstrap for b in cluster.running())


def create_rf3(cluster, partitions=1):
    admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 3)])[TOPIC].result(30)
    wait_for(lambda: all(leader >= 0 and isr == [0, 1, 2]
                         for leader, _, isr in describe(cluster.brokers[0].bootstrap).values()),
             15, "every partition led with a full ISR")


class Producers:
    """An idempotent acks=all confluent-kafka producer and a kafka-python 0.10 producer (Produce
    v2, acks=all) writing one partition until stopped; they record every acknowledgement.

    Delivery errors go to `errors` (a record not acknowledged is no failure: the tests check that
    the acknowledged ones are kept). What breaks the run goes to `failures`, and `stop()` fails
    the test with it: an exception that ended a producer's thread, an offset acknowledged twice
    (two acknowledged records at one offset: one of them is lost), a fatal confluent-kafka error
    or a non-retriable error of the broker's to the legacy producer."""

    def __init__(self, cluster, partition=0):
        self.cluster = cluster
        self.partition = partition
        self.lock = threading.Lock()
        self.idempotent = {}  # offset -> value
        self.legacy = {}
        self.success_times = []
        self.last_ack = {}  # "idempotent" / "legacy" -> time of its last acknowledgement
        self.errors = []
        self.failures = []
        self.running = True
        self.threads = [threading.Thread(target=self._run, args=(self._modern,), daemon=True),
                        threading.Thread(target=self._run, args=(self._legacy,), daemon=True)]
        for thread in self.threads:
            thread.start()

    def _run(self, producer):
        try:
            producer()
        except BaseException:  # noqa: BLE001 - stop() fails the test with it
            with self.lock:
                self.failures.append((producer.__name__, traceback.format_exc()))

    def _acknowledged(self, kind, offset, value):
        """Records an acknowledgement of the `kind` ("idempotent" or "legacy") producer (under
        the lock)."""
        if offset in self.idempotent or offset in self.legacy:
            self.failures.append(("offset acknowledged twice", offset, value,
                                  self.idempotent.get(offset, self.legacy.get(offset))))
        getattr(self, kind)[offset] = value
        now = time.monotonic()
        self.success_times.append(now)
        self.last_ack[kind] = now

    def _modern(self):
        producer = Producer({"bootstrap.servers": bootstraps(self.cluster), "enable.idempotence": True,
                             "acks": "all", "linger.ms": 2, "message.timeout.ms": 120000,
                             "retry.backoff.ms": 50, "topic.metadata.refresh.interval.ms": 1000})

        def delivered(error, message):
            with self.lock:
                if error is None:
                    self._acknowledged("idempotent", message.offset(), message.value())
                else:
                    self.errors.append(("idempotent", str(error)))
                    if error.fatal():
                        self.failures.append(("idempotent", str(error)))

        sequence = 0
        while self.running:
            producer.produce(TOPIC, value=b"i-%08d" % sequence, partition=self.partition, on_delivery=delivered)
            sequence += 1
            producer.poll(0.004)
        left = producer.flush(120)
        assert left == 0, f"{left} records neither acknowledged nor failed after 120 s"

    def _legacy(self):
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        producer = KafkaProducer(bootstrap_servers=bootstraps(self.cluster), api_version=(0, 10, 1),
                                 acks="all", retries=1000, retry_backoff_ms=100, linger_ms=2,
                                 max_in_flight_requests_per_connection=1, request_timeout_ms=30000,
                                 metadata_max_age_ms=1000)
        sequence = 0
        while self.running:
            value = b"l-%08d" % sequence
            sequence += 1
            try:
                offset = producer.send(TOPIC, value=value, partition=self.partition).get(timeout=120).offset
                with self.lock:
                    self._acknowledged("legacy", offset, value)
            except KafkaError as error:
                with self.lock:
                    self.errors.append(("legacy", repr(error)))
                    if not error.retriable:
                        self.failures.append(("legacy", repr(error)))
            time.sleep(0.01)
        producer.close(30)

    def both_acknowledged_since(self, since):
        """Whether each producer had an acknowledgement after `since` (time.monotonic())."""
        with self.lock:
            return all(self.last_ack.get(kind, 0) > since for kind in ("idempotent", "legacy"))

    def count(self):
        with self.lock:
            return len(self.idempotent) + len(self.legacy)

    def stop(self):
        """Stops both producers; fails if either broke (see the class doc) or never finished."""
        self.running = False
        for thread in self.threads:
            thread.join(180)
        stuck = [thread.name for thread in self.threads if thread.is_alive()]
        with self.lock:
            failures = list(self.failures)
        assert not stuck and not failures, (stuck, failures)


def leader_of(cluster, partition=0):
    for broker in cluster.running():
        try:
            leader, _, _ = describe(broker.bootstrap)[partition]
        except Exception:  # noqa: BLE001 - a broker still starting
            continue
        if leader >= 0:
            return leader
    return -1


def read_all(bootstrap, end, legacy, partition=0):
    """Every record of `partition` below `end` through `bootstrap`: {offset: value}."""
    seen = {}
    if legacy:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=(0, 10, 1),
                                 enable_auto_commit=False, group_id=None)
        tp = KTP(TOPIC, partition)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 60
        while len(seen) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    assert record.offset not in seen, ("read twice", record.offset)
                    seen[record.offset] = record.value
        consumer.close()
        return seen
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, partition, 0)])
    deadline = time.monotonic() + 60
    while len(seen) < end and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error():
            continue
        assert message.offset() not in seen, ("read twice", message.offset())
        seen[message.offset()] = message.value()
    consumer.close()
    return seen


def batches_on_disk(data_dir, partition=0):
    """(base offset, last offset delta, CRC, leader epoch) of every batch in the replica's segments."""
    found = []
    for path in sorted(glob.glob(os.path.join(data_dir, f"{TOPIC}-{partition}", "*.log"))):
        with open(path, "rb") as segment:
            data = segment.read()
        position = 0
        while position + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, position)
            if length <= 0 or position + 12 + length > len(data):
                break
            epoch, = struct.unpack_from(">i", data, position + 12)
            crc, = struct.unpack_from(">I", data, position + 17)
            delta, = struct.unpack_from(">i", data, position + 23)
            found.append((base, delta, crc, epoch))
            position += 12 + length
    return found


def list_latest(bootstrap, partition=0):
    """ListOffsets latest of `partition` as a consumer sees it (the high watermark). Retries, as
    a client does, the answer of a new leader whose HW has not reached its epoch's start yet
    (KIP-207), or of a broker not yet leading by its own replica though its metadata names it,
    which librdkafka hands to the application."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    deadline = time.monotonic() + 15
    try:
        while True:
            try:
                _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=10)
                return high
            except KafkaException as error:
                code = error.args[0].code()
                if code not in (KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.LEADER_NOT_AVAILABLE,
                                KafkaError.NOT_LEADER_FOR_PARTITION) \
                        or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        consumer.close()


def test_leader_kills_under_acks_all_lose_no_acknowledged_record(replicated3):
    cluster = replicated3
    print(f"SKIFF_SEED={SEED} SKIFF_REPLICATION_KILLS={KILLS}")
    rng = random.Random(SEED)
    create_rf3(cluster)
    producers = Producers(cluster)
    failovers = []
    try:
        wait_for(lambda: producers.count() > 50, 30, "first acknowledgements")
        for cycle in range(KILLS):
            leader = leader_of(cluster)
            assert leader >= 0, "no leader before the kill"
            victim = cluster.brokers[leader]
            time.sleep(rng.uniform(0.2, 1.5))
            with producers.lock:
                acked_before = len(producers.success_times)
            killed_at = time.monotonic()
            port = victim.port
            victim.stop(signal.SIGKILL)
            wait_for(lambda: len(producers.success_times) > acked_before
                     and producers.success_times[-1] > killed_at, SESSION_MS / 1000 + 20,
                     f"an acks=all acknowledgement after killing broker {leader} (cycle {cycle})")
            with producers.lock:
                failovers.append(next(t for t in producers.success_times if t > killed_at) - killed_at)
            victim.start(port=port)
            # Back in the ISR before the next kill, so two replicas always hold every ack.
            wait_for(lambda: describe(cluster.brokers[(leader + 1) % 3].bootstrap)[0][2] == [0, 1, 2],
                     LAG_MS / 1000 + 20, f"broker {leader} back in the ISR (cycle {cycle})")
    finally:
        producers.stop()
    failovers.sort()
    p50 = failovers[len(failovers) // 2]
    SUMMARY_LINES.append(
        f"replication: {KILLS} leader kills (seed {SEED}), {len(producers.idempotent)} idempotent + "
        f"{len(producers.legacy)} legacy acks=all acks, failover p50 {p50:.2f} s max {failovers[-1]:.2f} s")
    assert failovers[-1] <= SESSION_MS / 1000 + 5, failovers
    assert_every_ack_kept(cluster, producers)


def assert_every_ack_kept(cluster, producers):
    """Every acknowledged record is read at its offset through each broker by a modern and a
    legacy consumer, idempotent ones once; the replicas hold identical batches, over 2+ epochs."""
    assert not [e for e in producers.errors if e[0] == "idempotent"], producers.errors[:5]
    end = list_latest(cluster.brokers[0].bootstrap)
    acked = {**producers.idempotent, **producers.legacy}
    assert max(acked) < end
    for broker in cluster.brokers:
        for legacy in (False, True):
            seen = read_all(broker.bootstrap, end, legacy)
            missing = [offset for offset, value in acked.items() if seen.get(offset) != value]
            assert not missing, (broker.port, legacy, missing[:10])
            values = [v for v in seen.values() if v.startswith(b"i-")]
            assert len(values) == len(set(values)), "an idempotent record was stored twice"
    # Every replica holds the same batches up to the same log end once replication settled.
    wait_for(lambda: len({tuple(batches_on_disk(d)) for d in cluster.dirs}) == 1, 20,
             "identical batches on every replica")
    epochs = {epoch for _, _, _, epoch in batches_on_disk(cluster.dirs[0])}
    assert len(epochs) >= 2, epochs


def test_a_rolling_restart_of_every_broker_under_acks_all_loses_nothing(replicated3):
    """Each broker in turn is stopped (SIGTERM, as an operator's rolling restart does) and
    started again, the next only once the ISR is full again; the producers never stop."""
    cluster = replicated3
    create_rf3(cluster)
    producers = Producers(cluster)
    started = time.monotonic()
    try:
        wait_for(lambda: producers.count() > 50, 30, "first acknowledgements")
        for index, broker in enumerate(cluster.brokers):
            port = broker.port
            acked_before = producers.count()
            broker.stop()
            broker.start(port=port)
            # Back in every ISR as each broker sees it, and the producers got past the restart.
            wait_for(lambda: all(describe(b.bootstrap)[0][2] == [0, 1, 2] for b in cluster.brokers),
                     LAG_MS / 1000 + 20, f"broker {index} back in the ISR")
            legacy_before = len(producers.legacy)
            try:
                wait_for(lambda: producers.count() > acked_before + 100
                         and len(producers.legacy) > legacy_before + 5, 30,
                         f"acks=all acknowledgements of both producers after restarting broker {index}")
            except AssertionError:
                for b in cluster.brokers:
                    print("=== broker", b.port, "".join(b.log_lines[-30:]))
                print("legacy errors", producers.errors[-5:])
                raise
    finally:
        producers.stop()
    SUMMARY_LINES.append(
        f"replication: rolling restart of 3 brokers in {time.monotonic() - started:.1f} s, "
        f"{len(producers.idempotent)} idempotent + {len(producers.legacy)} legacy acks=all acks kept")
    assert_every_ack_kept(cluster, producers)


def test_acks_all_needs_min_insync_replicas_and_loses_nothing_when_they_return(replicated3):
    cluster = replicated3
    create_rf3(cluster)
    producer = Producer({"bootstrap.servers": bootstraps(cluster), "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": 20000})
    acked = {}
    errors = []

    def delivered(error, message):
        if error is None:
            acked[message.offset()] = message.value()
        else:
            errors.append(error)

    for index in range(20):
        producer.produce(TOPIC, value=b"before-%d" % index, partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0 and len(acked) == 20
    leader = leader_of(cluster)
    stopped = [b for i, b in enumerate(cluster.brokers) if i != leader]
    ports = [b.port for b in stopped]
    for broker in stopped:
        broker.stop(signal.SIGKILL)
    alive = cluster.brokers[leader]
    # The controller takes them out of the ISR once their sessions end; the leader keeps leading.
    wait_for(lambda: describe(alive.bootstrap)[0][2] == [leader], SESSION_MS / 1000 + 10, "ISR of one")
    figures = metrics(alive)
    assert figures["skiff_partitions_under_replicated"] == 1, figures
    assert figures["skiff_partitions_under_min_isr"] == 1, figures
    codes = []
    with socket.create_connection((alive.host, alive.port), timeout=10) as connection:
        for correlation_id in range(3):
            connection.sendall(produce_v3_frame(TOPIC, 0, correlation_id, acks=-1, value=b"refused"))
            codes.append(produce_v3_error(connection, correlation_id))
    assert codes == [NOT_ENOUGH_REPLICAS] * 3, codes
    for broker, port in zip(stopped, ports):
        broker.start(port=port)
    wait_for(lambda: describe(alive.bootstrap)[0][2] == [0, 1, 2], LAG_MS / 1000 + 20, "full ISR again")
    wait_for(lambda: metrics(alive)["skiff_partitions_under_replicated"] == 0, 10, "no under-replicated partition")
    for index in range(20):
        producer.produce(TOPIC, value=b"after-%d" % index, partition=0, on_delivery=delivered)
    if producer.flush(30) != 0 or len(acked) != 40:
        for broker in cluster.brokers:
            print("=== broker", broker.port, "".join(broker.log_lines[-40:]))
    assert len(acked) == 40, errors[:3]
    end = list_latest(alive.bootstrap)
    for broker in cluster.brokers:
        seen = read_all(broker.bootstrap, end, legacy=False)
        assert all(seen.get(offset) == value for offset, value in acked.items()), broker.port
        assert b"refused" not in seen.values()


def test_a_paused_follower_leaves_the_isr_and_rejoins_and_the_hw_never_goes_down(long_sessions3):
    cluster = long_sessions3
    create_rf3(cluster)
    leader = leader_of(cluster)
    follower = cluster.brokers[(leader + 1) % 3]
    bootstrap = cluster.brokers[leader].bootstrap
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": 30000})
    acked, errors, watermarks = [], [], []

    def delivered(error, message):
        (errors if error else acked).append(error or message.offset())

    def produce(count, prefix):
        for index in range(count):
            producer.produce(TOPIC, value=b"%s-%d" % (prefix, index), partition=0, on_delivery=delivered)
        assert producer.flush(30) == 0
        watermarks.append(list_latest(bootstrap))

    produce(10, b"before")
    follower.process.send_signal(signal.SIGSTOP)
    try:
        # Past replica.lag.time.max.ms but within its session: only the leader can drop it.
        started = time.monotonic()
        produce(10, b"paused")  # acks=all waits for the paused follower until the ISR shrinks
        wait_for(lambda: len(describe(bootstrap)[0][2]) == 2, SLOW_LAG_MS / 1000 + 5, "ISR shrunk")
        shrunk_after = time.monotonic() - started
        produce(10, b"shrunk")
        # The paused follower's last fetch asked for offset 10 at most: it lacks at least the 20
        # records since, as the leader's per-partition lag says.
        figures = metrics(cluster.brokers[leader])
        assert figures[lag_key(TOPIC, 0)] >= 20, figures
        assert figures["skiff_partitions_under_replicated"] == 1, figures
    finally:
        follower.process.send_signal(signal.SIGCONT)
    wait_for(lambda: describe(bootstrap)[0][2] == [0, 1, 2], 20, "the follower rejoined")
    wait_for(lambda: metrics(cluster.brokers[leader])[lag_key(TOPIC, 0)] == 0, 10, "no follower lag")
    produce(10, b"rejoined")
    SUMMARY_LINES.append(f"replication: a paused follower left the ISR {shrunk_after:.1f} s after the pause "
                         f"(replica.lag.time.max.ms {SLOW_LAG_MS})")
    assert not errors, errors[:3]
    assert len(acked) == 40 and watermarks == sorted(watermarks), watermarks
    assert watermarks[-1] == 40
    wait_for(lambda: len({tuple(batches_on_disk(d)) for d in cluster.dirs}) == 1, 20,
             "identical batches on every replica")


def test_a_follower_behind_the_leaders_log_start_resets_there_and_catches_up(replicated3):
    """DeleteRecords on the leader while a follower is down moves the log start past the
    follower's end: its next fetch is OFFSET_OUT_OF_RANGE with the leader's log start, and it
    starts its log there (Kafka's truncateFullyAndStartAt) instead of retrying forever."""
    from confluent_kafka import TopicPartition as TP

    cluster = replicated3
    create_rf3(cluster)
    leader = leader_of(cluster)
    bootstrap = cluster.brokers[leader].bootstrap
    follower_index = (leader + 1) % 3
    follower = cluster.brokers[follower_index]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for index in range(10):
        producer.produce(TOPIC, value=b"old-%d" % index, partition=0)
    assert producer.flush(30) == 0
    port = follower.port
    follower.stop(signal.SIGKILL)
    wait_for(lambda: follower_index not in describe(bootstrap)[0][2], SESSION_MS / 1000 + 10, "follower out")
    for index in range(30):
        producer.produce(TOPIC, value=b"new-%d" % index, partition=0)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deleted = admin.delete_records([TP(TOPIC, 0, 25)])
    assert next(iter(deleted.values())).result(20).low_watermark == 25
    follower.start(port=port)
    wait_for(lambda: describe(bootstrap)[0][2] == [0, 1, 2], LAG_MS / 1000 + 20, "the follower rejoined")
    batches = batches_on_disk(cluster.dirs[follower_index])
    # Its log starts with the leader's batch holding offset 25 (Kafka's rule when the leader's
    # log start lies inside a batch); nothing of what it held before is left.
    base, delta = batches[0][0], batches[0][1]
    assert 10 <= base <= 25 <= base + delta, batches[:3]
    leader_batches = [b for b in batches_on_disk(cluster.dirs[leader]) if b[0] >= batches[0][0]]
    assert batches == leader_batches


def test_offsets_committed_to_a_replicated_offsets_topic_survive_their_coordinators_kill(replicated3):
    """A cluster's __consumer_offsets has 3 replicas by default and a commit is answered once its
    records are on every in-sync replica, so killing the coordinator right after the answer loses
    no committed offset: the partition's next leader serves them."""
    cluster = replicated3
    create_rf3(cluster, partitions=3)
    group = "replicated-offsets"
    committer = Consumer({"bootstrap.servers": bootstraps(cluster), "group.id": group,
                          "enable.auto.commit": False})
    wanted = [TopicPartition(TOPIC, p, 100 + p) for p in range(3)]

    def commit():
        # The first commit may meet the coordinator still moving in (__consumer_offsets was just
        # created): librdkafka hands the retriable coordinator errors to the application.
        try:
            return committer.commit(offsets=wanted, asynchronous=False)
        except KafkaException as error:
            assert error.args[0].code() in RETRIABLE_COORDINATOR_ERRORS, error
            return None

    committed = wait_for(commit, 20, "an acknowledged commit")
    assert all(tp.error is None for tp in committed), committed
    committer.close()
    offsets_topic = describe(cluster.brokers[0].bootstrap, "__consumer_offsets")
    assert all(len(replicas) == 3 for _, replicas, _ in offsets_topic.values()), offsets_topic
    admin = AdminClient({"bootstrap.servers": bootstraps(cluster)})
    coordinator = admin.describe_consumer_groups([group])[group].result(30).coordinator.id
    cluster.brokers[coordinator].stop(signal.SIGKILL)
    survivor = next(b for b in cluster.running())
    reader = Consumer({"bootstrap.servers": survivor.bootstrap, "group.id": group,
                       "enable.auto.commit": False})

    def read_back():
        try:
            found = reader.committed([TopicPartition(TOPIC, p) for p in range(3)], timeout=5)
        except Exception:  # noqa: BLE001 - the coordinator is moving (retriable)
            return None
        offsets = [tp.offset for tp in found]
        return offsets if offsets == [100, 101, 102] else None

    started = time.monotonic()
    wait_for(read_back, SESSION_MS / 1000 + 20, "the committed offsets from the next coordinator")
    reader.close()
    SUMMARY_LINES.append(f"replication: committed offsets read back {time.monotonic() - started:.1f} s "
                         f"after their coordinator (broker {coordinator}) was killed")


def store_history(cluster):
    """Every event under the cluster's root in etcd's history, in revision order, as
    (revision, "PUT" | "DELETE", key below the root, decoded JSON value or None). `etcdctl watch`
    from revision 1 prints the history and then waits: `timeout` ends it."""
    root = f"/skiff/{cluster.name}/v1/"
    result = subprocess.run(
        ["timeout", "3", "etcdctl", "--endpoints=" + ",".join(cluster.etcd.endpoints),
         "watch", "--prefix", "--rev=1", root, "-w", "json"],
        env=dict(os.environ, ETCDCTL_API="3"), capture_output=True, text=True)
    events = []
    for line in result.stdout.splitlines():
        for event in json.loads(line).get("Events") or []:
            kv = event["kv"]
            key = base64.b64decode(kv["key"]).decode()[len(root):]
            value = json.loads(base64.b64decode(kv["value"])) if "value" in kv else None
            events.append((kv["mod_revision"], "DELETE" if event.get("type") == 1 else "PUT", key, value))
    return events


def test_a_sigtermed_leader_hands_over_before_it_exits_and_loses_no_acknowledged_record(rebalancing3):
    """...and once it is back in the ISR, the controller's imbalance check gives it back the
    leadership it is the preferred replica of (it led from the creation on)."""
    cluster = rebalancing3
    create_rf3(cluster)
    producers = Producers(cluster)
    try:
        wait_for(lambda: producers.count() > 50, 30, "first acknowledgements")
        leader = leader_of(cluster)
        victim = cluster.brokers[leader]
        terminated_at = time.monotonic()
        victim.process.send_signal(signal.SIGTERM)
        code = victim.process.wait(30)
        exited_at = time.monotonic()
        victim.process = None
        assert code == 0, "".join(victim.log_lines[-30:])
        wait_for(lambda: leader_of(cluster) not in (-1, leader), 10, "another leader")
        wait_for(lambda: producers.success_times[-1] > exited_at + 1, 20, "acknowledgements after the exit")
    finally:
        producers.stop()
    with producers.lock:
        times = sorted(producers.success_times)
    gaps = [later - earlier for earlier, later in zip(times, times[1:]) if later > terminated_at]
    gap = max(gaps)
    SUMMARY_LINES.append(
        f"replication: SIGTERM of the leader: exit after {exited_at - terminated_at:.2f} s, longest "
        f"acks=all gap {gap:.3f} s (session {SESSION_MS} ms)")
    print(f"controlled shutdown: exit after {exited_at - terminated_at:.2f} s, failover gap {gap:.3f} s")
    assert gap < SESSION_MS / 1000 / 2, gap
    # In the store's history: the registration turned shutting_down, then the partition was given
    # to another broker, and only then the registration went (the lease revoked at exit).
    history = store_history(cluster)
    broker_key, partition_key = f"brokers/{leader}", f"partitions/{TOPIC}/0"
    marked = next((r for r, kind, key, value in history
                   if key == broker_key and kind == "PUT" and value["state"] == "shutting_down"), None)
    assert marked is not None, "the registration never said shutting_down"
    moved = next((r for r, kind, key, value in history
                  if key == partition_key and r > marked and value["leader"] not in (leader, -1)), None)
    gone = next((r for r, kind, key, _ in history
                 if key == broker_key and kind == "DELETE" and r > marked), None)
    assert moved is not None and gone is not None, history[-20:]
    assert marked < moved < gone, (marked, moved, gone)
    moved_state = next(v for r, _, key, v in history if key == partition_key and r == moved)
    assert leader not in moved_state["isr"] and len(moved_state["isr"]) == 2, moved_state
    wait_for(lambda: any("clean shutdown" in line for line in victim.log_lines), 5, "the last log line")
    log = "".join(victim.log_lines)
    assert log.index("controlled shutdown: leads nothing movable") < log.index("clean shutdown"), log[-3000:]
    assert not [e for e in producers.errors if e[0] == "idempotent"], producers.errors[:5]
    survivors = [b for b in cluster.brokers if b is not victim]
    end = list_latest(survivors[0].bootstrap)
    acked = {**producers.idempotent, **producers.legacy}
    assert max(acked) < end
    for broker in survivors:
        seen = read_all(broker.bootstrap, end, legacy=False)
        missing = [offset for offset, value in acked.items() if seen.get(offset) != value]
        assert not missing, (broker.port, missing[:10])
        values = [v for v in seen.values() if v.startswith(b"i-")]
        assert len(values) == len(set(values)), "an idempotent record was stored twice"
    assert leader_of(cluster) != leader
    victim.start(port=victim.port)
    wait_for(lambda: leader_of(cluster) == leader, LAG_MS / 1000 + 10, "the preferred replica leading again")
    assert any("PreferredElection" in line for b in cluster.running() for line in b.log_lines)


def partition_view(bootstrap, topic):
    """(leader, isr, error code) of partition 0 of `topic` as `bootstrap`'s Metadata answers."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    partition = metadata.topics[topic].partitions[0]
    return partition.leader, sorted(partition.isrs), partition.error.code() if partition.error else 0


def produce_values(bootstrap, topic, values):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": 20000})
    acked = {}

    def delivered(error, message):
        assert error is None, error
        acked[message.offset()] = message.value()

    for value in values:
        producer.produce(topic, value=value, partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0
    return acked


def read_topic(bootstrap, topic, count):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = {}
    deadline = time.monotonic() + 30
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen[message.offset()] = message.value()
    consumer.close()
    return seen


def test_unclean_election_gives_a_replica_outside_the_isr_the_lead_only_where_the_topic_allows(etcd):
    """RF 2 on a cluster of 2: broker X stops (it leaves the ISRs), Y takes more records and stops.
    When X returns it is the only replica running, outside the ISR: the topic with
    unclean.leader.election.enable is led by it (losing what only Y had), the other stays
    LEADER_NOT_AVAILABLE until Y, its ISR, returns with every record."""
    cluster = SkiffCluster(etcd, 2)
    cluster.brokers = [cluster._broker(i, cluster.dirs[i], REPLICA_SETTINGS) for i in range(2)]
    cluster.start()
    try:
        check_unclean_election(cluster)
    finally:
        cluster.stop()


def lag_key(topic, partition):
    return f'skiff_partition_follower_lag{{topic="{topic}",partition="{partition}"}}'


def check_unclean_election(cluster):
    agreed_controller(cluster)
    wait_for(lambda: all(metrics(b)["skiff_cluster_brokers"] == 2 for b in cluster.brokers), 10,
             "2 brokers in every image")
    admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
    clean, unclean = "clean", "unclean"
    overrides = {"min.insync.replicas": "1"}
    futures = admin.create_topics([
        NewTopic(clean, 1, 2, config=overrides),
        NewTopic(unclean, 1, 2, config={**overrides, "unclean.leader.election.enable": "true"})])
    for future in futures.values():
        future.result(30)
    x, y = cluster.brokers
    ports = {0: x.port, 1: y.port}
    for topic in (clean, unclean):
        wait_for(lambda: partition_view(y.bootstrap, topic)[1] == [0, 1], 15, f"{topic} ISR 0,1")
    before = {t: produce_values(y.bootstrap, t, [b"before-%d" % i for i in range(5)]) for t in (clean, unclean)}
    x.stop()
    for topic in (clean, unclean):
        wait_for(lambda: partition_view(y.bootstrap, topic)[:2] == (1, [1]), 10, f"{topic} led by 1 alone")
    only_on_y = {t: produce_values(y.bootstrap, t, [b"only-on-1-%d" % i for i in range(3)]) for t in (clean, unclean)}
    y.stop()
    x.start(port=ports[0])
    wait_for(lambda: partition_view(x.bootstrap, unclean)[:2] == (0, [0]), 15, "unclean led by 0 alone")
    # The clean topic keeps its ISR and no leader: 0 runs but was not in sync.
    assert partition_view(x.bootstrap, clean) == (-1, [1], LEADER_NOT_AVAILABLE), partition_view(x.bootstrap, clean)
    after = produce_values(x.bootstrap, unclean, [b"after-%d" % i for i in range(2)])
    assert sorted(after) == [5, 6], after  # 0 lacked the records only 1 had: they are lost
    assert read_topic(x.bootstrap, unclean, 7) == {**before[unclean], **after}
    assert metrics(x)["skiff_unclean_leader_elections_total"] == 1
    assert any("unclean leader election" in line for line in x.log_lines)
    assert partition_view(x.bootstrap, clean)[0] == -1, "still leaderless after the unclean election"
    # x, the only broker, is the controller: it counts the leaderless partition as offline.
    assert metrics(x)["skiff_cluster_partitions_offline"] == 1, metrics(x)
    y.start(port=ports[1])
    wait_for(lambda: partition_view(x.bootstrap, clean)[0] == 1, 15, "clean led by 1 again")
    wait_for(lambda: sum(metrics(b)["skiff_cluster_partitions_offline"] for b in cluster.brokers) == 0, 10,
             "no offline partition")
    assert read_topic(x.bootstrap, clean, 8) == {**before[clean], **only_on_y[clean]}
