"""KIP-848 consumer groups (`group.protocol=consumer`) against Skiff with real clients: Apache
Kafka's Java client 4.x (tests/clients/java/src/skiff/ConsumerProtocolMember.java, one JVM per
member, each printing what it reads, commits and owns as JSON lines) and confluent-kafka
(librdkafka's KIP-848 consumer).

- A group of three consumes a 12-partition topic; one member's JVM is SIGKILLed: its partitions
  move to the other two within the session timeout, which keep consuming without a gap longer
  than one heartbeat interval (plus the slack below), and every record is read exactly once
  except those the killed member read after its last commit.
- A static member (`group.instance.id`) leaves and comes back within its session and gets the
  same partitions; the other member never gets them. Admin.describeConsumerGroups and
  kafka-consumer-groups.sh --describe --members show the group as Kafka shows a consumer group.
- Pattern subscriptions, broker-side (`SubscriptionPattern`, RE2/J resolved by the coordinator)
  and client-side (`java.util.regex.Pattern`), pick up a topic created later.
- A confluent-kafka member and a Java member share a group: both get partitions, every record is
  consumed once; once both left, DeleteGroups deletes the group.
- Online upgrade (`group.consumer.migration.policy`, Kafka's default `bidirectional`): a classic
  group of three Java members (`group.protocol=classic`, Kafka's default assignors) consuming while
  records arrive is upgraded member by member (each stopped and started again with
  `group.protocol=consumer`); the first consumer-protocol member turns the group into a consumer
  group that keeps serving the classic members; then downgraded the same way (the last
  consumer-protocol member's leave turns it back into a classic group); no record is lost or read
  twice past its commit.

The broker runs with the session timeout and its minimum at 10 s and the heartbeat interval at
1 s, so a kill costs seconds."""

import json
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import SUMMARY_LINES
from java_programs import JVM_OPTIONS, classpath, run_tools

SESSION_TIMEOUT_MS = 10_000
HEARTBEAT_INTERVAL_MS = 1_000
BROKER_SETTINGS = (
    f"group.consumer.session.timeout.ms={SESSION_TIMEOUT_MS}",
    f"group.consumer.min.session.timeout.ms={SESSION_TIMEOUT_MS}",
    f"group.consumer.heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS}",
    f"group.consumer.min.heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS}",
)
# Slack on top of one heartbeat interval for a surviving member's longest pause between two
# polls that return records, while records arrive on each of its partitions every ~60 ms: its
# poll timeout (100 ms), one fetch round trip, and a scheduling or GC stall of a JVM sharing two
# cores with three other JVMs, the broker and the producer. A survivor whose partitions were
# revoked and handed back (what KIP-848 avoids) waits for at least one heartbeat round trip of
# its own plus the revoking member's: more than the bound.
GAP_SLACK_MS = 500
# How long a member may take to start, join and own partitions (JVM start included).
JOIN_TIMEOUT_S = 30
# From the kill to the survivors owning the killed member's partitions: the session timeout, then
# at most one heartbeat interval until each survivor's next heartbeat carries the new target, and
# slack for the revocation round trip of the reconciliation.
TAKEOVER_BOUND_MS = SESSION_TIMEOUT_MS + HEARTBEAT_INTERVAL_MS + 2_000
CONSUME_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory):
    from conftest import Broker

    broker = Broker(str(tmp_path_factory.mktemp("skiff-kip848")), BROKER_SETTINGS).start()
    yield broker
    broker.stop()


def now_ms():
    return int(time.time() * 1000)


class Member:
    """One ConsumerProtocolMember JVM: its events as they arrive, and commands on its stdin."""

    def __init__(self, classes, bootstrap, group, subscription, instance_id="-", protocol="consumer"):
        args = ["java", *JVM_OPTIONS, "-cp", f"{classes}:{classpath()}", "skiff.ConsumerProtocolMember",
                bootstrap, group, subscription, instance_id, protocol]
        self.process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.events = []
        self.lock = threading.Lock()
        self.stderr = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.process.stderr), daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            event = json.loads(line)
            with self.lock:
                self.events.append(event)

    def of(self, kind):
        with self.lock:
            return [event for event in self.events if event["e"] == kind]

    def assignment(self):
        """The partitions of the latest `assigned` event, as a set of (topic, partition)."""
        assigned = self.of("assigned")
        return {tuple(part) for part in assigned[-1]["parts"]} if assigned else set()

    def assignments_since_start(self):
        """The `assigned` events of the current consumer (after the latest `start`)."""
        with self.lock:
            starts = [i for i, event in enumerate(self.events) if event["e"] == "start"]
            since = self.events[starts[-1]:] if starts else []
        return [event for event in since if event["e"] == "assigned"]

    def owned_at(self, part, since_ms):
        """When this member was first assigned `part` at or after `since_ms` (its `assigned`
        event's time), or None."""
        for event in self.of("assigned"):
            if event["ms"] >= since_ms and list(part) in event["parts"]:
                return event["ms"]
        return None

    def records(self):
        return [(r["t"], r["p"], r["o"], r["ms"]) for r in self.of("rec")]

    def send(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def wait_for(self, condition, what, timeout_s=JOIN_TIMEOUT_S):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition():
                return
            errors = self.of("error")
            assert not errors, f"{what}: {errors}\n{''.join(self.stderr[-40:])}"
            time.sleep(0.05)
        raise AssertionError(f"{what} within {timeout_s} s\n{self.events[-5:]}\n{''.join(self.stderr[-40:])}")

    def describe(self):
        before = len(self.of("describe"))
        self.send("describe")
        self.wait_for(lambda: len(self.of("describe")) > before, "describe answered")
        return self.of("describe")[-1]

    def stop(self):
        if self.process.poll() is None:
            try:
                self.send("stop")
                self.process.wait(20)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()

    def kill(self):
        self.process.kill()
        self.process.wait()


@pytest.fixture
def members(java_classes, module_broker):
    started = []

    def start(group, subscription, instance_id="-", protocol="consumer"):
        member = Member(java_classes, module_broker.bootstrap, group, subscription, instance_id, protocol)
        started.append(member)
        return member

    yield start
    for member in started:
        member.stop()


def create_topic(bootstrap, name, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


class SteadyProducer:
    """Produces to every partition of a topic in turn at a steady rate, from a thread, and keeps
    the (partition, offset) of every delivered record."""

    def __init__(self, bootstrap, topic, partitions, per_second):
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
        self.topic, self.partitions, self.interval = topic, partitions, 1.0 / per_second
        self.delivered = set()
        self.failed = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error, message):
        if error is not None:
            self.failed.append(str(error))
        else:
            self.delivered.add((message.partition(), message.offset()))

    def _run(self):
        index = 0
        next_at = time.monotonic()
        while not self.stopping.is_set():
            self.producer.produce(self.topic, value=f"v{index}", partition=index % self.partitions,
                                  on_delivery=self._delivered)
            self.producer.poll(0)
            index += 1
            next_at += self.interval
            time.sleep(max(0.0, next_at - time.monotonic()))
        self.producer.flush(30)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()
        self.thread.join(40)
        assert not self.failed, self.failed[:5]
        return self.delivered


def wait_all(members, condition, what, timeout_s=JOIN_TIMEOUT_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout_s} s: " + "; ".join(
        f"{sorted(m.assignment())} last={m.events[-2:]}" for m in members))


def disjoint_cover(assignments, wanted):
    seen = [part for assignment in assignments for part in assignment]
    return len(seen) == len(set(seen)) and set(seen) == wanted


def longest_gap_ms(times, start_ms, end_ms):
    """The longest pause between two consecutive receive times within [start_ms, end_ms]."""
    inside = sorted({t for t in times if start_ms <= t <= end_ms})
    edges = [start_ms, *inside, end_ms]
    return max(b - a for a, b in zip(edges, edges[1:]))


def test_killed_member_partitions_move_while_the_others_keep_consuming(members, module_broker):
    topic, partitions, group = "kip848-kill", 12, "kip848-kill-g"
    create_topic(module_broker.bootstrap, topic, partitions)
    everything = {(topic, p) for p in range(partitions)}
    a, b, c = (members(group, f"topics:{topic}") for _ in range(3))
    wait_all([a, b, c], lambda: all(m.assignment() for m in (a, b, c))
             and disjoint_cover([m.assignment() for m in (a, b, c)], everything),
             "three members owning all 12 partitions between them")
    producer = SteadyProducer(module_broker.bootstrap, topic, partitions, per_second=200).start()
    # Every member consumes before the kill.
    wait_all([a, b, c], lambda: all(m.of("commit") for m in (a, b, c)), "each member committing")
    time.sleep(1)
    victim_parts = c.assignment()
    killed_at = now_ms()
    c.kill()
    wait_all([a, b], lambda: disjoint_cover([a.assignment(), b.assignment()], everything),
             "the two survivors owning all 12 partitions", timeout_s=SESSION_TIMEOUT_MS / 1000 + 10)
    # Each of the victim's partitions is owned by a survivor from its first `assigned` event.
    moved_at = max(min(t for t in (a.owned_at(part, killed_at), b.owned_at(part, killed_at)) if t is not None)
                   for part in victim_parts)
    # Keep producing a while after the move, so the survivors read the moved partitions too.
    time.sleep(2)
    stopped_at = now_ms()
    delivered = producer.stop()

    wanted = {(topic, p, o) for p, o in delivered}
    read = lambda: {(t, p, o) for m in (a, b, c) for t, p, o, _ in m.records()}
    wait_all([a, b], lambda: wanted <= read(), "every delivered record read", timeout_s=CONSUME_TIMEOUT_S)
    check_read_once(survivors=(a, b), victim=c)
    assert moved_at - killed_at <= TAKEOVER_BOUND_MS, (killed_at, moved_at)

    # While records arrived (the whole production after the kill, the takeover included), neither
    # survivor paused longer than a heartbeat interval plus the slack.
    gaps = [longest_gap_ms([ms for _, _, _, ms in survivor.records()], killed_at, stopped_at)
            for survivor in (a, b)]
    SUMMARY_LINES.append(f"kip848 kill: takeover {moved_at - killed_at} ms after the kill "
                         f"(bound {TAKEOVER_BOUND_MS}), survivors' longest gaps {gaps} ms "
                         f"(bound {HEARTBEAT_INTERVAL_MS + GAP_SLACK_MS})")
    for gap in gaps:
        assert gap <= HEARTBEAT_INTERVAL_MS + GAP_SLACK_MS, (gaps, killed_at, stopped_at)


def check_read_once(survivors, victim):
    """Every record is read once, except that records the killed member read after its last
    commit of their partition may be read again by their next owner."""
    committed = {}
    for commit in victim.of("commit"):
        for t, p, offset in commit["parts"]:
            committed[(t, p)] = offset
    reads = {}
    for member in (*survivors, victim):
        for t, p, o, _ in member.records():
            reads.setdefault((t, p, o), []).append(member)
    for (t, p, o), readers in reads.items():
        if len(readers) == 1:
            continue
        again = len(readers) == 2 and victim in readers and o >= committed.get((t, p), 0)
        assert again, f"{t}-{p}@{o} read {len(readers)} times (victim committed {committed.get((t, p))})"


def tool_rows(out, group):
    """The rows of a kafka-consumer-groups.sh table, each a {column: value} by the header's column
    positions (an empty cell, such as a dynamic member's instance id, is blank)."""
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("GROUP "))
    names = header.split()
    starts = [header.index(f" {name}") + 1 if i else 0 for i, name in enumerate(names)]
    bounds = list(zip(starts, starts[1:] + [None]))
    return [{name: line[a:b].strip() for name, (a, b) in zip(names, bounds)}
            for line in lines if line.startswith(group + " ")]


def test_static_member_comes_back_to_its_partitions_and_describe_shows_the_group(members, module_broker,
                                                                                 java_classes):
    topic, partitions, group = "kip848-static", 6, "kip848-static-g"
    create_topic(module_broker.bootstrap, topic, partitions)
    everything = {(topic, p) for p in range(partitions)}
    static = members(group, f"topics:{topic}", "static-1")
    other = members(group, f"topics:{topic}")
    wait_all([static, other], lambda: static.assignment() and other.assignment()
             and disjoint_cover([static.assignment(), other.assignment()], everything),
             "both members owning partitions")
    held = static.assignment()

    described = static.describe()
    assert (described["type"], described["state"], described["assignor"]) == ("Consumer", "Stable", "uniform")
    by_instance = {m["instance"]: m for m in described["members"]}
    assert set(by_instance) == {"static-1", None}
    for member, reported in ((by_instance["static-1"], static), (by_instance[None], other)):
        assert {tuple(p) for p in member["assignment"]} == reported.assignment()
        assert {tuple(p) for p in member["target"]} == reported.assignment()
        assert member["host"] == "/127.0.0.1" and member["client"].startswith("consumer-")

    # kafka-consumer-groups.sh --describe --members --verbose shows both members, each with its
    # current and target assignment (the tool reads ConsumerGroupDescribe for a consumer group).
    tool = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
    [(code, out, err)] = run_tools(java_classes, [[tool, "--bootstrap-server", module_broker.bootstrap,
                                                   "--describe", "--group", group, "--members", "--verbose"]])
    assert code == 0, err
    rows = tool_rows(out, group)
    shown = {row["CLIENT-ID"]: (row["CURRENT-ASSIGNMENT"], row["TARGET-ASSIGNMENT"]) for row in rows}
    assert sorted(row["GROUP-INSTANCE-ID"] for row in rows) == ["", "static-1"], out
    expected = {}
    for member in described["members"]:
        parts = ",".join(str(p) for _, p in sorted(tuple(part) for part in member["assignment"]))
        expected[member["client"]] = (f"{topic}:{parts}", f"{topic}:{parts}")
    assert shown == expected, out

    restarted_at = len(static.of("start"))
    other_assigned_before = len(other.of("assigned"))
    static.send("restart")  # close (a static leave keeps the place), then a new consumer joins
    static.wait_for(lambda: len(static.of("start")) > restarted_at
                    and static.assignments_since_start() and static.assignment() == held,
                    "the static member owning its partitions again", timeout_s=SESSION_TIMEOUT_MS / 1000)
    # The other member never got the static member's partitions meanwhile.
    for event in other.of("assigned")[other_assigned_before:]:
        assert not ({tuple(p) for p in event["parts"]} & held), event
    producer = Producer({"bootstrap.servers": module_broker.bootstrap})
    for p in range(partitions):
        producer.produce(topic, value=b"after", partition=p)
    producer.flush(30)
    static.wait_for(lambda: {(t, p) for t, p, _, _ in static.records()} == held,
                    "the static member reading its partitions", timeout_s=CONSUME_TIMEOUT_S)


def test_pattern_subscriptions_pick_up_a_topic_created_later(members, module_broker):
    create_topic(module_broker.bootstrap, "kip848-rx-a", 2)
    broker_side = members("kip848-rx-g1", "pattern:kip848-rx-.*")
    client_side = members("kip848-rx-g2", "javapattern:kip848-rx-.*")
    for member in (broker_side, client_side):
        member.wait_for(lambda m=member: {t for t, _ in m.assignment()} == {"kip848-rx-a"},
                        "the pattern member owning the first topic")
    create_topic(module_broker.bootstrap, "kip848-rx-b", 3)
    producer = Producer({"bootstrap.servers": module_broker.bootstrap})
    for topic, count in (("kip848-rx-a", 2), ("kip848-rx-b", 3)):
        for p in range(count):
            producer.produce(topic, value=b"x", partition=p)
    producer.flush(30)
    wanted = {("kip848-rx-a", 0), ("kip848-rx-a", 1)} | {("kip848-rx-b", p) for p in range(3)}
    for member in (broker_side, client_side):
        member.wait_for(lambda m=member: m.assignment() == wanted, "the new topic's partitions assigned")
        member.wait_for(lambda m=member: {(t, p) for t, p, _, _ in m.records()} == wanted,
                        "a record read from every partition of both topics", timeout_s=CONSUME_TIMEOUT_S)


def test_confluent_kafka_and_java_members_share_a_group_then_it_is_deleted(members, module_broker):
    topic, partitions, group, count = "kip848-mixed", 6, "kip848-mixed-g", 600
    create_topic(module_broker.bootstrap, topic, partitions)
    java = members(group, f"topics:{topic}")
    ck = Consumer({
        "bootstrap.servers": module_broker.bootstrap, "group.id": group, "group.protocol": "consumer",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    ck_owned, ck_read = set(), []
    ck.subscribe([topic], on_assign=lambda consumer, parts: ck_owned.update((p.topic, p.partition) for p in parts),
                 on_revoke=lambda consumer, parts: ck_owned.difference_update((p.topic, p.partition) for p in parts))
    try:
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        everything = {(topic, p) for p in range(partitions)}
        while not (ck_owned and java.assignment() and disjoint_cover([ck_owned, java.assignment()], everything)):
            assert time.monotonic() < deadline, (ck_owned, java.assignment())
            ck.poll(0.1)
        producer = Producer({"bootstrap.servers": module_broker.bootstrap})
        for index in range(count):
            producer.produce(topic, value=f"m{index}", partition=index % partitions)
        producer.flush(30)
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(ck_read) + len(java.records()) < count and time.monotonic() < deadline:
            message = ck.poll(0.1)
            if message is not None and message.error() is None:
                ck_read.append((message.topic(), message.partition(), message.offset()))
                ck.commit(message, asynchronous=False)
    finally:
        ck.close()
    java_read = [(t, p, o) for t, p, o, _ in java.records()]
    assert ck_read and java_read
    everything_read = ck_read + java_read
    assert len(everything_read) == len(set(everything_read)) == count
    assert {(t, p) for t, p, _ in ck_read}.isdisjoint({(t, p) for t, p, _ in java_read})

    # Both left: the empty consumer group is deleted (DeleteGroups through librdkafka's admin
    # client), records and offsets, and no longer listed.
    java.stop()
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    for future in admin.delete_consumer_groups([group]).values():
        future.result(30)
    listed = admin.list_consumer_groups().result(30)
    assert group not in {listing.group_id for listing in listed.valid}


def check_read_once_past_commits(readers):
    """No record is read twice unless every earlier reader of it stopped without committing past
    it (a member commits after each poll, so only a poll cut short by a revocation may repeat)."""
    committed = {}
    for member in readers:
        for commit in member.of("commit"):
            for t, p, offset in commit["parts"]:
                key = (id(member), t, p)
                committed[key] = max(committed.get(key, 0), offset)
    reads = {}
    for member in readers:
        for t, p, o, ms in member.records():
            reads.setdefault((t, p, o), []).append((ms, member))
    for (t, p, o), seen in reads.items():
        seen.sort(key=lambda read: read[0])
        for _, earlier in seen[:-1]:
            assert committed.get((id(earlier), t, p), 0) <= o, \
                f"{t}-{p}@{o} read {len(seen)} times, the first reader had committed past it"


def test_classic_group_upgrades_then_downgrades_online_member_by_member(members, module_broker):
    topic, partitions, group = "kip848-upgrade", 12, "kip848-upgrade-g"
    create_topic(module_broker.bootstrap, topic, partitions)
    everything = {(topic, p) for p in range(partitions)}
    current = [members(group, f"topics:{topic}", "-", "classic") for _ in range(3)]
    covered = lambda: (all(m.assignment() for m in current)
                       and disjoint_cover([m.assignment() for m in current], everything))
    wait_all(current, covered, "three classic members owning all 12 partitions")
    producer = SteadyProducer(module_broker.bootstrap, topic, partitions, per_second=200).start()
    wait_all(current, lambda: all(m.of("commit") for m in current), "each classic member committing")
    retired = []

    def replace(step, protocol):
        retired.append(current[step])
        current[step].stop()
        current[step] = members(group, f"topics:{topic}", "-", protocol)
        wait_all(current, covered, f"{protocol} member {step + 1} in: the three owning all 12 partitions")

    for step in range(3):
        replace(step, "consumer")
        if step == 0:
            # The first consumer-protocol member converted the group; the classic members stay in it.
            described = current[0].describe()
            assert (described["type"], len(described["members"])) == ("Consumer", 3), described
    # Every member owning partitions does not mean every one acknowledged its epoch yet.
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while (described := current[0].describe())["state"] != "Stable" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (described["type"], described["state"], len(described["members"])) == ("Consumer", "Stable", 3)
    # Back: classic members join the consumer group; the last consumer member's leave downgrades it.
    for step in range(3):
        replace(step, "classic")
    described = current[0].describe()
    assert (described["type"], len(described["members"])) == ("Classic", 3), described
    time.sleep(1)
    delivered = producer.stop()
    wanted = {(topic, p, o) for p, o in delivered}
    read = lambda: {(t, p, o) for m in (*retired, *current) for t, p, o, _ in m.records()}
    wait_all(current, lambda: wanted <= read(), "every delivered record read", timeout_s=CONSUME_TIMEOUT_S)
    check_read_once_past_commits([*retired, *current])
