"""ElectLeaders (API 43) on 3 brokers and the shared etcd, with the controller's automatic
rebalance off (`auto.leader.rebalance.enable=false`, checked every second so that it would show):
after a rolling restart of the preferred replica another broker keeps leading, until Apache
Kafka's own `kafka-leader-election` tool (LeaderElectionCommand, through a broker that is not the
controller) gives the partition back to its preferred replica. A second run finds nothing to do
(ELECTION_NOT_NEEDED), an unclean election of a led partition too, and producers writing acks=all
throughout lose nothing. With the preferred replica down the election is refused
(PREFERRED_LEADER_NOT_AVAILABLE) and the leader stays; without an etcd quorum it is
REQUEST_TIMED_OUT after the request's timeout, and goes through once the quorum is back. librdkafka's admin client checks the
exact error codes. Kafka's clients send ElectLeaders to the controller; a raw request shows that
any other broker elects as well."""

import socket
import struct
import time

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient

from java_programs import run_tools
from test_cluster import wait_for
from test_replication import (LAG_MS, REPLICA_SETTINGS, TOPIC, Producers, assert_every_ack_kept,
                              create_rf3, leader_of, ready, start_replicated)

ELECT = "org.apache.kafka.tools.LeaderElectionCommand"
ELECTION_NOT_NEEDED = 84
PREFERRED_LEADER_NOT_AVAILABLE = 80
UNKNOWN_TOPIC_OR_PARTITION = 3
REQUEST_TIMED_OUT = 7
# The check would run every second if the rebalance were on.
SETTINGS = REPLICA_SETTINGS + ("auto.leader.rebalance.enable=false", "leader.imbalance.check.interval.seconds=1")


@pytest.fixture
def electing3(etcd):
    cluster = start_replicated(etcd, SETTINGS)
    yield ready(cluster)
    cluster.stop()


def assignment(bootstrap, partition=0):
    """The replicas of `partition` in assignment order (the preferred replica first)."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
    return list(metadata.topics[TOPIC].partitions[partition].replicas)


def isr_everywhere(cluster, isr):
    def seen():
        views = []
        for broker in cluster.running():
            metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(TOPIC, timeout=10)
            views.append(sorted(metadata.topics[TOPIC].partitions[0].isrs))
        return all(view == isr for view in views)
    return seen


def not_the_controller(cluster):
    """A running broker that is not the controller: ElectLeaders may come to any broker."""
    metadata = AdminClient({"bootstrap.servers": cluster.running()[0].bootstrap}).list_topics(timeout=10)
    return next(b for b in cluster.running() if cluster.brokers.index(b) != metadata.controller_id)


def elect_codes(bootstrap, election_type, partitions):
    """{(topic, partition): error code} of librdkafka's ElectLeaders."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # No timeout arguments: confluent-kafka 2.16.1 fails to parse any keyword of elect_leaders
    # (SystemError "more argument specifiers than keyword list entries").
    result = admin.elect_leaders(election_type, [TopicPartition(t, p) for t, p in partitions]).result(40)
    # Each value is None or the partition's KafkaError.
    return {(tp.topic, tp.partition): (error.code() if error is not None else 0)
            for tp, error in result.items()}


def raw_elect(bootstrap, election_type, partition=0, timeout_ms=15000):
    """One raw ElectLeaders v1 for partition `partition` of TOPIC, to exactly this broker (clients
    send it to the controller): (top-level error, [(partition, error)])."""
    host, port = bootstrap.rsplit(":", 1)
    client, name = b"skiff-test", TOPIC.encode()
    body = struct.pack(">hhih", 43, 1, 9, len(client)) + client
    body += struct.pack(">bi", election_type, 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">ii", 1, partition) + struct.pack(">i", timeout_ms)
    with socket.create_connection((host, int(port)), timeout=timeout_ms / 1000 + 10) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        answer = sock.recv(size, socket.MSG_WAITALL)
    correlation, _throttle, error, topics = struct.unpack(">iihi", answer[:14])
    assert (correlation, topics) == (9, 1), answer
    at = 16 + struct.unpack(">h", answer[14:16])[0]
    count, = struct.unpack(">i", answer[at:at + 4])
    at += 4
    results = []
    for _ in range(count):
        index, code, message_bytes = struct.unpack(">ihh", answer[at:at + 8])
        at += 8 + max(message_bytes, 0)
        results.append((index, code))
    return error, results


def tool(bootstrap, *args):
    return [ELECT, "--bootstrap-server", bootstrap, *args]


def test_kafkas_tool_gives_leadership_back_to_the_preferred_replica_and_nothing_is_lost(
        electing3, java_classes):
    cluster = electing3
    create_rf3(cluster)
    preferred = assignment(cluster.brokers[0].bootstrap)[0]
    assert leader_of(cluster) == preferred, "the first leader is the preferred replica"
    producers = Producers(cluster)
    try:
        wait_for(lambda: producers.count() > 50, 30, "first acknowledgements")
        # A rolling restart of the preferred replica: its controlled shutdown moves the leadership.
        victim = cluster.brokers[preferred]
        port = victim.port
        assert victim.stop() == 0
        victim.start(port=port)
        wait_for(isr_everywhere(cluster, [0, 1, 2]), LAG_MS / 1000 + 20, "the preferred replica back in the ISR")
        moved_to = leader_of(cluster)
        assert moved_to not in (-1, preferred)
        time.sleep(3)  # three imbalance checks, were the rebalance on
        assert leader_of(cluster) == moved_to, "auto.leader.rebalance.enable=false moved the leader"

        via = cluster.running()[0]
        all_partitions, named, unclean, all_again = run_tools(java_classes, [
            tool(via.bootstrap, "--election-type", "preferred", "--all-topic-partitions"),
            tool(via.bootstrap, "--election-type", "preferred", "--topic", TOPIC, "--partition", 0),
            tool(via.bootstrap, "--election-type", "unclean", "--topic", TOPIC, "--partition", 0),
            tool(via.bootstrap, "--election-type", "preferred", "--all-topic-partitions"),
        ])
        status, out, err = all_partitions
        assert status == 0, (out, err)
        assert f"Successfully completed leader election (PREFERRED) for partitions {TOPIC}-0" in out, out
        # The broker that answered waited for its own image; the others follow within moments.
        wait_for(lambda: all(leader_of_seen_by(b) == preferred for b in cluster.running()), 5, "every broker naming the preferred leader")
        for run in (named, unclean):
            status, out, err = run
            assert status == 0, (out, err)
            assert f"Valid replica already elected for partitions {TOPIC}-0" in out, out
        # Every partition, again: nothing needed, so nothing listed and nothing failed.
        status, out, err = all_again
        assert status == 0 and "could not be elected" not in out + err, (out, err)
        assert "Successfully completed" not in out, out

        codes = elect_codes(via.bootstrap, ElectionType.PREFERRED, [(TOPIC, 0), (TOPIC, 5)])
        assert codes == {(TOPIC, 0): ELECTION_NOT_NEEDED, (TOPIC, 5): UNKNOWN_TOPIC_OR_PARTITION}, codes
        codes = elect_codes(via.bootstrap, ElectionType.UNCLEAN, [(TOPIC, 0)])
        assert codes == {(TOPIC, 0): ELECTION_NOT_NEEDED}, codes

        acked = producers.count()
        wait_for(lambda: producers.count() > acked + 100, 30, "acknowledgements after the election")
    finally:
        producers.stop()
    assert leader_of(cluster) == preferred
    assert any("ElectLeaders: elected" in line for b in cluster.brokers for line in b.log_lines)
    assert_every_ack_kept(cluster, producers)


def leader_of_seen_by(broker):
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(TOPIC, timeout=10)
    return metadata.topics[TOPIC].partitions[0].leader


def test_an_election_to_a_preferred_replica_that_is_down_is_refused(electing3, java_classes):
    cluster = electing3
    create_rf3(cluster)
    preferred = assignment(cluster.brokers[0].bootstrap)[0]
    victim = cluster.brokers[preferred]
    assert victim.stop() == 0  # controlled shutdown, then the registration goes
    survivors = cluster.running()
    wait_for(lambda: all(len(AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).brokers) == 2
                         for b in survivors), 10, "the preferred replica gone from Metadata")
    led_by = leader_of(cluster)
    assert led_by not in (-1, preferred)
    via = survivors[0]
    [(status, out, err)] = run_tools(java_classes, [
        tool(via.bootstrap, "--election-type", "preferred", "--topic", TOPIC, "--partition", 0),
    ])
    assert status != 0, (out, err)
    assert f"Error completing leader election (PREFERRED) for partition: {TOPIC}-0: " \
           "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException" in out + err, (out, err)
    assert "1 replica(s) could not be elected" in out + err, (out, err)
    codes = elect_codes(via.bootstrap, ElectionType.PREFERRED, [(TOPIC, 0)])
    assert codes == {(TOPIC, 0): PREFERRED_LEADER_NOT_AVAILABLE}, codes
    # A partition with a leader needs no unclean election, even with a replica down.
    codes = elect_codes(via.bootstrap, ElectionType.UNCLEAN, [(TOPIC, 0)])
    assert codes == {(TOPIC, 0): ELECTION_NOT_NEEDED}, codes
    assert leader_of(cluster) == led_by
    # Back in the ISR, it can lead again: elected through a broker that is not the controller
    # (what it answers, it answers once the store took the election).
    victim.start(port=victim.port)
    wait_for(isr_everywhere(cluster, [0, 1, 2]), LAG_MS / 1000 + 20, "the preferred replica back in the ISR")
    assert leader_of(cluster) == led_by
    other = not_the_controller(cluster)
    assert raw_elect(other.bootstrap, 0) == (0, [(0, 0)])
    assert leader_of_seen_by(other) == preferred
    assert any("ElectLeaders: elected" in line for line in other.log_lines)
    assert raw_elect(other.bootstrap, 0) == (0, [(0, ELECTION_NOT_NEEDED)])
    assert raw_elect(other.bootstrap, 0, partition=3) == (0, [(3, UNKNOWN_TOPIC_OR_PARTITION)])


def move_leadership_away(cluster):
    """Restarts the preferred replica (SIGTERM: its controlled shutdown moves the leadership) and
    waits until it is back in the ISR; returns the preferred replica's id."""
    preferred = assignment(cluster.brokers[0].bootstrap)[0]
    victim = cluster.brokers[preferred]
    port = victim.port
    assert victim.stop() == 0
    victim.start(port=port)
    wait_for(isr_everywhere(cluster, [0, 1, 2]), LAG_MS / 1000 + 20, "the preferred replica back in the ISR")
    assert leader_of(cluster) not in (-1, preferred)
    return preferred


def test_an_election_the_store_cannot_take_in_time_is_request_timed_out(etcd, electing3):
    cluster = electing3
    create_rf3(cluster)
    preferred = move_leadership_away(cluster)
    via = not_the_controller(cluster)
    etcd.kill(1)
    etcd.kill(2)
    try:
        started = time.monotonic()
        answer = raw_elect(via.bootstrap, 0, timeout_ms=2000)
        waited_s = time.monotonic() - started
        assert answer == (0, [(0, REQUEST_TIMED_OUT)]), answer
        assert 1.9 <= waited_s < 10, waited_s
    finally:
        etcd.start_member(1)
        etcd.start_member(2)
        etcd.wait_healthy(1)
        etcd.wait_healthy(2)
    # With the quorum back the same request goes through (or finds the write that timed out
    # landed after all).
    def elected():
        try:
            error, [(_, code)] = raw_elect(via.bootstrap, 0, timeout_ms=5000)
        except OSError:  # the broker's connection while its session recovers
            return False
        return error == 0 and code in (0, ELECTION_NOT_NEEDED)
    wait_for(elected, 30, "the election after the outage")
    wait_for(lambda: leader_of(cluster) == preferred, 10, "the preferred replica leading")
