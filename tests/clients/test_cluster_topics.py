"""Topics across a cluster of 3 brokers on the shared etcd (issue 15, parts 3-5): a 12-partition
topic created through one broker, produced and read back through each broker as bootstrap with
modern and legacy clients, a consumer group split across brokers, a killed broker taking only its
own partitions away, a paused leader refusing writes with NOT_LEADER_OR_FOLLOWER, and the
CreateTopics latency on etcd against the embedded store."""

import os
import socket
import statistics
import struct
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from clients import ck_group_consumer, ck_group_poll, ck_produce, kcat_consume, kp_consume, node
from conftest import SUMMARY_LINES, messages
from test_cluster import FAILOVER_BOUND_S, SESSION_MS, SkiffCluster, agreed_controller, wait_for

PARTITIONS = 12
PER_PARTITION = 5
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6


# These scenarios are about where RF 1 partitions live and who serves them (issue 15), so they
# pin the single-replica settings that a cluster otherwise defaults away from (RF 3, 2 in sync);
# replicated topics and offsets are test_replication's.
SINGLE_REPLICA = ("default.replication.factor=1", "offsets.topic.replication.factor=1",
                  "min.insync.replicas=1")


@pytest.fixture
def cluster3(etcd):
    cluster = SkiffCluster(etcd, 3, SINGLE_REPLICA).start()
    agreed_controller(cluster)
    wait_for(lambda: len(AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
                         .list_topics(timeout=10).brokers) == 3, 10, "3 brokers in Metadata")
    yield cluster
    cluster.stop()


def create(bootstrap, topic, partitions=PARTITIONS):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def partitions_of(bootstrap, topic):
    """{partition: (leader, error code)} as `bootstrap` describes `topic`."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    described = metadata.topics[topic]
    return {p.id: (p.leader, p.error.code() if p.error else 0) for p in described.partitions.values()}


def wait_all_led(bootstrap, topic, what="every partition led"):
    return wait_for(lambda: (lambda p: p if len(p) == PARTITIONS and all(
        leader >= 0 and code == 0 for leader, code in p.values()) else None)(partitions_of(bootstrap, topic)),
        FAILOVER_BOUND_S + 10, what)


def msgs_for(partition):
    return messages(PER_PARTITION, prefix=f"p{partition}-", value_bytes=20)


def produce_everywhere(cluster, topic):
    for partition in range(PARTITIONS):
        bootstrap = cluster.brokers[partition % 3].bootstrap
        ck_produce(bootstrap, topic, msgs_for(partition), partition=partition)


def test_a_topic_spread_over_three_brokers_is_served_through_each_of_them(cluster3):
    topic = "spread"
    create(cluster3.brokers[1].bootstrap, topic)
    leaders = wait_all_led(cluster3.brokers[0].bootstrap, topic)
    # Every broker sees the same assignment.
    for broker in cluster3.brokers:
        assert partitions_of(broker.bootstrap, topic) == leaders
    spread = sorted(leader for leader, _ in leaders.values())
    SUMMARY_LINES.append(f"cluster: 12 partitions placed on brokers {spread}")
    assert len(set(spread)) >= 2, spread
    # The operator views are the cluster's: every broker shows the same bundle owners and counts
    # the same leaderships per broker.
    import json
    from test_cluster import metrics
    from test_metrics import scrape

    views = []
    for broker in cluster3.brokers:
        _, body = scrape(broker, "/placement/bundles")
        views.append(sorted((b["hash_lo"], b["owner"]) for b in json.loads(body)["bundles"]
                            if b["namespace"] == topic))
    assert views[0] == views[1] == views[2] and {owner for _, owner in views[0]} <= {0, 1, 2}, views
    for broker in cluster3.brokers:
        figures = metrics(broker)
        led = {b: figures[f'skiff_cluster_partitions_led{{broker="{b}"}}'] for b in range(3)}
        assert sum(led.values()) == PARTITIONS, led  # no group yet: no __consumer_offsets
    produce_everywhere(cluster3, topic)
    for index, broker in enumerate(cluster3.brokers):
        # confluent-kafka (Fetch v11+) through this broker, every partition.
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        seen = {}
        deadline = time.monotonic() + 30
        while sum(map(len, seen.values())) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            seen.setdefault(message.partition(), []).append((message.key(), message.value()))
        consumer.close()
        for partition in range(PARTITIONS):
            assert seen.get(partition) == msgs_for(partition), (index, partition)
        # kafka-python as a 0.10.1 client (Fetch v3, down-converted to magic 1), some partitions.
        for partition in range(index, PARTITIONS, 3):
            got = kp_consume(broker.bootstrap, topic, PER_PARTITION, api_version=(0, 10, 1),
                             partition=partition)
            assert [(k, v) for _, k, v in got] == msgs_for(partition), (index, partition)
        # kafka-node 5 (its 0.9 table: Fetch v0, magic 0).
        partition = (index * 7 + 1) % PARTITIONS
        answer = node("consume", bootstrap=broker.bootstrap, topic=topic, count=PER_PARTITION,
                      partition=partition)
        assert [(k.encode(), v.encode()) for _, k, v in answer["messages"]] == msgs_for(partition)
        # kcat with the 0.9 protocol (Fetch v0, magic 0).
        partition = (index * 5) % PARTITIONS
        got, _ = kcat_consume(broker.bootstrap, topic, PER_PARTITION, legacy=True, partition=partition)
        assert [(k, v) for _, k, v in got] == msgs_for(partition), (index, partition)


def test_a_group_split_across_brokers_consumes_everything_once_and_commits(cluster3):
    topic = "grouped"
    create(cluster3.brokers[0].bootstrap, topic)
    wait_all_led(cluster3.brokers[0].bootstrap, topic)
    produce_everywhere(cluster3, topic)
    members = [ck_group_consumer(b.bootstrap, topic, "split-group") for b in cluster3.brokers]
    try:
        seen = []
        deadline = time.monotonic() + 60
        while len(seen) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            for member in members:
                got = ck_group_poll(member, 1, timeout_s=0.5)
                if got:
                    seen.extend(got)
                    member.commit(asynchronous=False)
        assert len(seen) == PARTITIONS * PER_PARTITION, len(seen)
        assert len({(p, o) for p, o, _, _ in seen}) == len(seen), "every record once"
        owners = {p for p, *_ in seen}
        assert owners == set(range(PARTITIONS))
    finally:
        for member in members:
            member.close()
    # The committed offsets are what a new member of the group starts from, through any broker.
    checker = Consumer({"bootstrap.servers": cluster3.brokers[2].bootstrap, "group.id": "split-group"})
    committed = checker.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
    checker.close()
    assert [tp.offset for tp in committed] == [PER_PARTITION] * PARTITIONS


def java_string_hash(text):
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group, partitions=50):
    """Kafka's coordinator partition: Utils.abs(groupId.hashCode()) % partitions."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def commit_offset(bootstrap, group, topic, partition, offset):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        consumer.close()


def committed_offset(bootstrap, group, topic, partition, timeout=20):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return consumer.committed([TopicPartition(topic, partition)], timeout=timeout)[0].offset
    finally:
        consumer.close()


def committed_offset_when_coordinated(bootstrap, group, topic, partition):
    """The committed offset, or None while the group's coordinator is moving: librdkafka hands
    committed() NOT_COORDINATOR (16), COORDINATOR_NOT_AVAILABLE (15) and
    COORDINATOR_LOAD_IN_PROGRESS (14) back instead of retrying, as a restarted coordinator
    answers them until its image shows its leadership again and its partitions are loaded."""
    from confluent_kafka import KafkaException
    try:
        return committed_offset(bootstrap, group, topic, partition, timeout=5)
    except KafkaException as error:
        if error.args[0].code() in (14, 15, 16):
            return None
        raise


def test_offsets_live_in_their_groups_partition_on_its_leader_and_survive_its_kill(cluster3):
    topic = "committed"
    create(cluster3.brokers[0].bootstrap, topic)
    wait_all_led(cluster3.brokers[0].bootstrap, topic)
    groups = [f"offsets-group-{n}" for n in range(12)]
    for n, group in enumerate(groups):
        commit_offset(cluster3.brokers[n % 3].bootstrap, group, topic, n % PARTITIONS, 1000 + n)
    # Each group's coordinator is the leader of its __consumer_offsets partition.
    offsets_topic = AdminClient({"bootstrap.servers": cluster3.brokers[0].bootstrap}).list_topics(
        "__consumer_offsets", timeout=10).topics["__consumer_offsets"]
    leader_of = {p.id: p.leader for p in offsets_topic.partitions.values()}
    assert len(leader_of) == 50 and set(leader_of.values()) <= {0, 1, 2}, leader_of
    coordinator = {group: leader_of[offsets_partition(group)] for group in groups}
    # The commits are in that partition's log, in the leader's data directory and nowhere else.
    for group in groups:
        partition = offsets_partition(group)
        for node_id, data_dir in enumerate(cluster3.dirs):
            log_dir = os.path.join(data_dir, f"__consumer_offsets-{partition}")
            size = sum(os.path.getsize(os.path.join(log_dir, f)) for f in os.listdir(log_dir)
                       if f.endswith(".log")) if os.path.isdir(log_dir) else 0
            if node_id == coordinator[group]:
                assert size > 0, (group, partition, node_id)
            else:
                assert not os.path.isdir(log_dir), (group, partition, node_id)
    victim_id = max(range(3), key=lambda b: sum(1 for c in coordinator.values() if c == b))
    victim = cluster3.brokers[victim_id]
    witness = cluster3.brokers[(victim_id + 1) % 3]
    victim.stop(__import__("signal").SIGKILL)
    # Groups coordinated elsewhere are served meanwhile.
    for n, group in enumerate(groups):
        if coordinator[group] != victim_id:
            assert committed_offset(witness.bootstrap, group, topic, n % PARTITIONS) == 1000 + n, group
    victim.start()
    # The restarted coordinator loads its partitions' logs again: every commit is back.
    for n, group in enumerate(groups):
        got = wait_for(lambda: committed_offset_when_coordinated(
            witness.bootstrap, group, topic, n % PARTITIONS) == 1000 + n,
                       FAILOVER_BOUND_S + 20, f"{group}'s offset after its coordinator's restart")
        assert got
    SUMMARY_LINES.append(
        f"cluster: 12 groups' offsets on coordinators {sorted(coordinator.values())}; "
        f"broker {victim_id}'s came back after SIGKILL and restart")


def test_a_killed_broker_takes_only_its_own_partitions_away(cluster3):
    topic = "survivors"
    create(cluster3.brokers[0].bootstrap, topic)
    leaders = wait_all_led(cluster3.brokers[0].bootstrap, topic)
    produce_everywhere(cluster3, topic)
    victim_id = max(range(3), key=lambda b: sum(1 for l, _ in leaders.values() if l == b))
    victim = cluster3.brokers[victim_id]
    witness = cluster3.brokers[(victim_id + 1) % 3]
    lost = {p for p, (leader, _) in leaders.items() if leader == victim_id}
    killed_at = time.monotonic()
    victim.stop(__import__("signal").SIGKILL)

    def unavailable():
        now = partitions_of(witness.bootstrap, topic)
        gone = {p for p, (_, code) in now.items() if code == LEADER_NOT_AVAILABLE}
        return now if gone == lost else None

    after = wait_for(unavailable, FAILOVER_BOUND_S, "the killed broker's partitions to become unavailable")
    detected_s = time.monotonic() - killed_at
    SUMMARY_LINES.append(f"cluster: a SIGKILLed broker's partitions answered 5 after {detected_s:.1f} s "
                         f"(session {SESSION_MS} ms)")
    for partition, (leader, code) in after.items():
        if partition not in lost:
            assert (leader, code) == leaders[partition]
    # The others keep serving writes and reads.
    kept = sorted(set(range(PARTITIONS)) - lost)[0]
    ck_produce(witness.bootstrap, topic, [(b"after", b"kill")], partition=kept)
    got = kp_consume(witness.bootstrap, topic, PER_PARTITION + 1, partition=kept)
    assert got[-1][1:] == (b"after", b"kill")
    restarted_at = time.monotonic()
    victim.start()
    wait_all_led(witness.bootstrap, topic, "every partition led again after the restart")
    SUMMARY_LINES.append(f"cluster: all partitions led again {time.monotonic() - restarted_at:.1f} s after the restarted broker listened")
    for partition in lost:
        got = kp_consume(witness.bootstrap, topic, PER_PARTITION, partition=partition)
        assert [(k, v) for _, k, v in got] == msgs_for(partition)


def produce_v3_frame(topic, partition, correlation_id, acks=1, value=b"paused"):
    """A raw Produce v3 of one record: client libraries retry NOT_LEADER_OR_FOLLOWER (and
    NOT_ENOUGH_REPLICAS) on their own, so the first answer is only visible on the wire."""
    from kafka.record.memory_records import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=None, key=b"k", value=value)
    builder.close()
    records = bytes(builder.buffer())
    name = topic.encode()
    client = b"skiff-test"
    body = struct.pack(">hhih", 0, 3, correlation_id, len(client)) + client
    body += struct.pack(">hhii", -1, acks, 10_000, 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">iii", 1, partition, len(records)) + records
    return struct.pack(">i", len(body)) + body


def produce_v3_error(sock, correlation_id):
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    answer = sock.recv(size, socket.MSG_WAITALL)
    correlation, topics = struct.unpack(">ii", answer[:8])
    assert (correlation, topics) == (correlation_id, 1)
    name_length = struct.unpack(">h", answer[8:10])[0]
    at = 10 + name_length
    _partitions, _partition, error = struct.unpack(">iih", answer[at:at + 10])
    return error


def test_a_leader_paused_past_its_session_never_writes_at_its_lapsed_epoch(cluster3):
    import signal

    topic = "paused"
    create(cluster3.brokers[0].bootstrap, topic)
    leaders = wait_all_led(cluster3.brokers[0].bootstrap, topic)
    partition, (leader_id, _) = next(iter(sorted(leaders.items())))
    leader = cluster3.brokers[leader_id]
    witness = cluster3.brokers[(leader_id + 1) % 3]
    host, port = leader.bootstrap.split(":")
    ck_produce(leader.bootstrap, topic, [(b"k", b"before")], partition=partition)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        leader.process.send_signal(signal.SIGSTOP)
        try:
            wait_for(lambda: partitions_of(witness.bootstrap, topic)[partition][1] == LEADER_NOT_AVAILABLE,
                     FAILOVER_BOUND_S, "the paused leader's partition to be taken away")
            # Sent while it is stopped: the first thing it reads when it wakes.
            sock.sendall(produce_v3_frame(topic, partition, 41))
        finally:
            leader.process.send_signal(signal.SIGCONT)
        error = produce_v3_error(sock, 41)
    # It registers again, is elected again (the only replica), and takes writes.
    wait_all_led(witness.bootstrap, topic, "the paused broker leading again")
    ck_produce(witness.bootstrap, topic, [(b"k", b"back")], partition=partition)
    if error != NOT_LEADER_OR_FOLLOWER:
        # On a loaded machine the woken broker can register, be elected again and see it before
        # its connection task reads the request: then the write is the new leadership's, which
        # stamps a higher leader epoch on it. Never one taken at the lapsed leadership's epoch.
        assert error == 0, error
        epochs = leader_epochs(witness.bootstrap, topic, partition, 3)
        assert epochs[1] > epochs[0], epochs


def leader_epochs(bootstrap, topic, partition, count):
    """The leader epochs stamped on the first `count` records of a partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"epochs-{topic}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    epochs = []
    deadline = time.monotonic() + 30
    try:
        while len(epochs) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                epochs.append(message.leader_epoch())
    finally:
        consumer.close()
    assert len(epochs) == count, epochs
    return epochs


def test_produce_right_after_creation_is_never_unknown_topic_or_partition(cluster3):
    """A broker whose logs have not followed the store yet (its materializer a few milliseconds
    behind the creation) must answer NOT_LEADER_OR_FOLLOWER, which clients retry after a
    metadata refresh, never UNKNOWN_TOPIC_OR_PARTITION: Kafka's rule for a partition the
    metadata names. Seen as 3 after a paused leader woke before it had opened the topic."""
    answers = []
    for round_ in range(4):
        topic = f"fresh-{round_}"
        sockets = []
        for broker in cluster3.brokers:
            host, port = broker.bootstrap.split(":")
            sockets.append(socket.create_connection((host, int(port)), timeout=30))
        try:
            create(cluster3.brokers[round_ % 3].bootstrap, topic)
            # At once, pipelined: every partition to every broker.
            for sock in sockets:
                sock.sendall(b"".join(produce_v3_frame(topic, p, 100 + p) for p in range(PARTITIONS)))
            for broker_id, sock in enumerate(sockets):
                for p in range(PARTITIONS):
                    answers.append((broker_id, p, produce_v3_error(sock, 100 + p)))
        finally:
            for sock in sockets:
                sock.close()
    codes = sorted({code for _, _, code in answers})
    SUMMARY_LINES.append(f"cluster: produce right after creation answered {codes} "
                         f"({sum(code == 0 for *_, code in answers)} of {len(answers)} taken)")
    assert set(codes) <= {0, NOT_LEADER_OR_FOLLOWER}, [a for a in answers if a[2] not in (0, 6)]


def test_partitions_added_on_one_broker_are_served_on_the_others(cluster3):
    topic = "grown"
    create(cluster3.brokers[0].bootstrap, topic, partitions=3)
    admin = AdminClient({"bootstrap.servers": cluster3.brokers[2].bootstrap})
    admin.create_partitions([NewPartitions(topic, PARTITIONS)])[topic].result(30)
    wait_all_led(cluster3.brokers[1].bootstrap, topic)
    produce_everywhere(cluster3, topic)
    admin.delete_topics([topic])[topic].result(30)
    wait_for(lambda: topic not in AdminClient({"bootstrap.servers": cluster3.brokers[1].bootstrap})
             .list_topics(timeout=10).topics, 10, "the deletion seen by another broker")


def create_latency_ms(bootstrap, prefix, rounds=8):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=10)
    times = []
    for index in range(rounds):
        name = f"{prefix}-{index}"
        started = time.monotonic()
        admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
        times.append((time.monotonic() - started) * 1000)
    return statistics.median(times)


def test_create_topics_latency_on_etcd_and_on_the_embedded_store(cluster3, broker):
    on_etcd = create_latency_ms(cluster3.brokers[0].bootstrap, "latency")
    local = create_latency_ms(broker.bootstrap, "latency")
    SUMMARY_LINES.append(f"cluster: CreateTopics of {PARTITIONS} partitions, median of 8: "
                         f"{on_etcd:.1f} ms on etcd (3 brokers), {local:.1f} ms on the local store "
                         f"({on_etcd / local:.2f}x)")
    assert on_etcd < 5000 and local < 5000


def test_metadata_changes_without_an_etcd_quorum_get_a_retriable_error(etcd, cluster3):
    from confluent_kafka import KafkaException
    from test_cluster import metrics

    topic = "before-outage"
    create(cluster3.brokers[0].bootstrap, topic)
    wait_all_led(cluster3.brokers[0].bootstrap, topic)
    errors_before = metrics(cluster3.brokers[0])["skiff_cluster_store_errors_total"]
    etcd.kill(1)
    etcd.kill(2)
    try:
        admin = AdminClient({"bootstrap.servers": cluster3.brokers[0].bootstrap})
        started = time.monotonic()
        future = admin.create_topics([NewTopic("during-outage", 3, 1)], request_timeout=15)["during-outage"]
        with pytest.raises(KafkaException) as refused:
            future.result(40)
        waited_s = time.monotonic() - started
        error = refused.value.args[0]
        assert error.retriable() or error.code() == 7, error
        SUMMARY_LINES.append(f"cluster: CreateTopics without an etcd quorum refused after {waited_s:.1f} s: {error}")
        assert metrics(cluster3.brokers[0])["skiff_cluster_store_errors_total"] > errors_before
        assert all(b.alive() for b in cluster3.brokers), "no broker exits over a lost store"
    finally:
        etcd.start_member(1)
        etcd.start_member(2)
        etcd.wait_healthy(1)
        etcd.wait_healthy(2)
    # Back with a quorum: the leases lived on (etcd restores them), every partition is led again,
    # and metadata changes work.
    wait_all_led(cluster3.brokers[1].bootstrap, topic, "every partition led after the outage")
    ck_produce(cluster3.brokers[1].bootstrap, topic, [(b"k", b"after-outage")], partition=0)
    create(cluster3.brokers[2].bootstrap, "after-outage", partitions=3)


def test_apache_kafkas_java_client_across_the_cluster(cluster3, java_classes):
    from java_programs import run_program

    # An idempotent acks=all producer per codec, through broker 1; a classic group with commits
    # and two rebalances, through broker 2 (its coordinator is wherever its offsets partition is).
    produced = run_program(java_classes, "skiff.IdempotentCodecs", cluster3.brokers[1].bootstrap,
                           "cluster-idem", 200)
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
        produced.expect_pass(f"idempotent_{codec}")
    grouped = run_program(java_classes, "skiff.GroupRebalance", cluster3.brokers[2].bootstrap,
                          "cluster-group", "cluster-group", 20)
    grouped.expect_pass("group_rebalance")
