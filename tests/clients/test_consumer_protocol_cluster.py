"""KIP-848 consumer groups across a coordinator failover (issue 40), with confluent-kafka
(librdkafka's `group.protocol=consumer`) on a cluster of 3 brokers on the shared etcd, every topic
and `__consumer_offsets` at replication factor 3 (2 in sync).

Two members share a 6-partition topic while a producer writes to it. The broker that leads the
group's `__consumer_offsets` partition, its coordinator, is SIGKILLed. The next leader of that
partition loads the group's records (members, epochs, assignments) with its offsets: the members
keep their partitions (no revocation, no loss), every commit acknowledged before or after the kill
is still there at the end, and every acknowledged record is read exactly once."""

import signal
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import SUMMARY_LINES
from test_cluster import FAILOVER_BOUND_S, SkiffCluster, agreed_controller, wait_for
from test_cluster_topics import offsets_partition

SESSION_TIMEOUT_MS = 10_000
HEARTBEAT_INTERVAL_MS = 1_000
SETTINGS = (
    f"group.consumer.session.timeout.ms={SESSION_TIMEOUT_MS}",
    f"group.consumer.min.session.timeout.ms={SESSION_TIMEOUT_MS}",
    f"group.consumer.heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS}",
    f"group.consumer.min.heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS}",
)
PARTITIONS = 6
GROUP = "kip848-failover"
TOPIC = "kip848-failover"
# Members consume for this long after the kill: the offsets partition's new leader is elected
# within FAILOVER_BOUND_S, and a member's heartbeat must reach it within its session.
AFTER_KILL_S = FAILOVER_BOUND_S + 8


class Member(threading.Thread):
    """One librdkafka consumer with `group.protocol=consumer`: what it owns, reads and commits."""

    def __init__(self, bootstrap, name):
        super().__init__(daemon=True)
        self.name = name
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "client.id": name,
        })
        self.owned = set()
        self.revoked = []
        self.lost = []
        self.read = []
        self.commits = []
        self.commit_errors = []
        self.running = True
        self.consumer.subscribe([TOPIC], on_assign=self._assigned, on_revoke=self._revoked,
                                on_lost=self._lost)

    def _assigned(self, _consumer, partitions):
        self.owned |= {p.partition for p in partitions}

    def _revoked(self, _consumer, partitions):
        self.revoked.append((time.monotonic(), sorted(p.partition for p in partitions)))
        self.owned -= {p.partition for p in partitions}

    def _lost(self, _consumer, partitions):
        self.lost.append((time.monotonic(), sorted(p.partition for p in partitions)))
        self.owned -= {p.partition for p in partitions}

    def run(self):
        while self.running:
            message = self.consumer.poll(0.2)
            if message is None or message.error():
                continue
            self.read.append((message.partition(), message.offset(), time.monotonic()))
            try:
                committed = self.consumer.commit(message=message, asynchronous=False)
                self.commits.append({p.partition: p.offset for p in committed if not p.error})
            except KafkaException as error:
                # NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE while the coordinator moves: not
                # acknowledged, so nothing a later check may count on.
                self.commit_errors.append(error.args[0].code())
        self.consumer.close()


class Writer(threading.Thread):
    """Produces round-robin over the partitions (acks=all) and keeps what was acknowledged."""

    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self.acked = set()
        self.running = True

    def _delivered(self, error, message):
        if error is None:
            self.acked.add((message.partition(), message.offset()))

    def run(self):
        sent = 0
        while self.running:
            self.producer.produce(TOPIC, f"v{sent}".encode(), partition=sent % PARTITIONS,
                                  on_delivery=self._delivered)
            sent += 1
            self.producer.poll(0.02)
        self.producer.flush(30)


def coordinator_of(bootstrap):
    offsets = AdminClient({"bootstrap.servers": bootstrap}).list_topics(
        "__consumer_offsets", timeout=10).topics["__consumer_offsets"]
    return offsets.partitions[offsets_partition(GROUP)].leader


def committed(bootstrap):
    """The group's committed offsets, read back by a consumer outside the group's membership."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        found = reader.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=20)
        return {p.partition: p.offset for p in found}
    finally:
        reader.close()


def settled(members):
    """What each member owns once the group is stable: both own partitions, together each
    partition once, both have committed, and nothing moved for three heartbeat intervals."""
    def owned():
        return [frozenset(m.owned) for m in members]

    first = owned()
    if (not all(first) or frozenset.union(*first) != frozenset(range(PARTITIONS))
            or sum(map(len, first)) != PARTITIONS or not all(m.commits for m in members)):
        return None
    time.sleep(3 * HEARTBEAT_INTERVAL_MS / 1000)
    return [set(o) for o in first] if owned() == first else None


@pytest.fixture
def cluster3(etcd):
    cluster = SkiffCluster(etcd, 3, SETTINGS).start()
    agreed_controller(cluster)
    yield cluster
    cluster.stop()


def test_members_keep_their_partitions_and_commits_across_a_coordinator_kill(cluster3):
    bootstrap = ",".join(b.bootstrap for b in cluster3.brokers)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    writer = Writer(bootstrap)
    writer.start()
    members = [Member(bootstrap, f"member-{n}") for n in range(2)]
    for member in members:
        member.start()
    owned_before = wait_for(lambda: settled(members), 60, "both members owning and committing")
    events_before = [(len(m.revoked), len(m.lost)) for m in members]
    victim = coordinator_of(bootstrap)
    survivors = ",".join(b.bootstrap for n, b in enumerate(cluster3.brokers) if n != victim)
    commits_before = [len(m.commits) for m in members]
    killed_at = time.monotonic()
    cluster3.brokers[victim].stop(signal.SIGKILL)
    wait_for(lambda: coordinator_of(survivors) not in (victim, -1), FAILOVER_BOUND_S + 5,
             "a new leader of the group's offsets partition")
    time.sleep(AFTER_KILL_S)
    # Both members commit again through the new coordinator, still owning what they owned.
    wait_for(lambda: all(len(m.commits) > c + 5 for m, c in zip(members, commits_before)), 30,
             "commits through the new coordinator")
    writer.running = False
    writer.join()
    wait_for(lambda: writer.acked <= {(p, o) for m in members for p, o, _ in m.read}, 60,
             "every acknowledged record read")
    # Before the members close: closing revokes everything.
    owned_after = [set(m.owned) for m in members]
    moved = [(m.name, m.revoked[revoked:], m.lost[lost:])
             for m, (revoked, lost) in zip(members, events_before)]
    for member in members:
        member.running = False
        member.join()
    assert owned_after == owned_before
    assert all(not revoked and not lost for _, revoked, lost in moved), (killed_at, moved)
    read = [(p, o) for m in members for p, o, _ in m.read]
    assert len(read) == len(set(read)), "a record read twice"
    # The last acknowledged commit of each partition is what the group holds at the end.
    last = {}
    for member in members:
        for commit in member.commits:
            for partition, offset in commit.items():
                last[partition] = max(last.get(partition, -1), offset)
    assert committed(survivors) == last
    gap = max((t2 - t1 for m in members for (_, _, t1), (_, _, t2) in zip(m.read, m.read[1:])
               if t1 >= killed_at), default=0)
    SUMMARY_LINES.append(
        f"KIP-848 failover: coordinator broker {victim} SIGKILLed; both members kept "
        f"{[sorted(o) for o in owned_before]}, {len(read)} records read once, "
        f"{sum(len(m.commit_errors) for m in members)} commits refused while it moved, "
        f"longest gap between two reads after the kill {gap:.1f} s")
