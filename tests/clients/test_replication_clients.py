"""The single node's real-client matrix over a replicated cluster (issue 16): 3 brokers on the shared
etcd, one topic with 3 replicas and min.insync.replicas=2. Every client writes its own partition with
its strongest acknowledgement (acks=all, or -1 in the legacy Produce v0/v1/v2 it speaks) through a
bootstrap list of all three brokers: confluent-kafka (idempotent), kafka-python (modern, 0.10.1 and
0.9), kcat (modern, and legacy with the 0.9.0 fallback), kafka-node, Apache Kafka's Java producer,
kafka-console-producer, kafka-producer-perf-test and an old (0.10.0) Java producer. All these
partitions are led by one broker, which is then SIGKILLed once; after the failover every producer
writes a second batch, and every client, unchanged (same settings, the dead broker still in its
bootstrap list), reads every acknowledged record exactly once and in order from the new leaders:

- consumers that read the first batch from the old leader carry on across the kill (confluent-kafka
  and kafka-python modern, 0.10.1 and 0.9);
- fresh ones read it all, the legacy ones through down-converted Fetch v0 (kafka-node), v1
  (kafka-python 0.9, legacy kcat, the 0.9 Java client), v2 (kafka-python 0.10.0, the 0.10.0 Java
  client) and v3 (kafka-python 0.10.1);
- kafka-console-consumer, a confluent-kafka group consumer and kafka-node's ConsumerGroup (group
  APIs v0, Fetch v2) commit after the failover, and the committed offsets are read back through
  another broker (kafka-consumer-groups, committed()).

One cluster, one kill, for the whole module."""

import gc
import pathlib
import re
import signal
import subprocess
import tempfile
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from clients import KCAT_LEGACY, node
from conftest import SUMMARY_LINES, messages
from java_programs import legacy_classpath, run_java, run_tools
from test_cluster import SESSION_MS, wait_for
from test_replication import (REPLICA_SETTINGS, RETRIABLE_COORDINATOR_ERRORS, bootstraps, describe,
                              ready, start_replicated)

TOPIC = "matrix"
# Each producing client writes its own partition (in this order over the victim's partitions).
PRODUCERS = ["confluent", "kp-modern", "kp-0.10.1", "kp-0.9", "kcat", "kcat-legacy", "node", "java",
             "console-producer", "perf-test", "java-0.10"]
FIRST, SECOND = 30, 20  # records per partition before and after the kill
INITIAL_PARTITIONS = 3 * len(PRODUCERS)
KP_VERSIONS = {"kp-modern": None, "kp-0.10.1": (0, 10, 1), "kp-0.9": (0, 9)}
LEGACY_JAVA = "0.10.0.1"
GROUP_SETTINGS = ("group.initial.rebalance.delay.ms=0",)
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONSOLE_GROUP = "matrix-console"
CONFLUENT_GROUP = "matrix-confluent"
DEADLINE_S = 30
FAILOVER_BOUND_S = SESSION_MS / 1000 + 15


def batch(client, first):
    """The (key, value) records `client` writes in its first or second batch (bytes; key None for
    the perf test, whose values are its record numbers: --payload-monotonic)."""
    count = FIRST if first else SECOND
    if client == "perf-test":
        return [(None, str(i).encode()) for i in range(count)]
    return messages(count, prefix=f"{client}-{'a' if first else 'b'}", value_bytes=60)


def lines_file(records):
    path = pathlib.Path(tempfile.mkdtemp(prefix="skiff-matrix-")) / "records.txt"
    path.write_bytes(b"".join(key + b"\t" + value + b"\n" for key, value in records))
    return str(path)


class Matrix:
    """The shared cluster and what each client was acknowledged."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.partition = {}  # client -> partition
        self.acked = {}  # client -> [(offset, key, value)] in offset order
        self.victim = None
        self.failover_s = None
        self.long_lived = {}  # name -> (consumer, read before the kill)
        self.in_process_producers = {}
        self.tool_runs = {}

    @property
    def all_bootstraps(self):
        """Every broker, the killed one included (a client keeps its settings)."""
        return ",".join(b.bootstrap for b in self.cluster.brokers)

    def survivors(self):
        return [b for i, b in enumerate(self.cluster.brokers) if i != self.victim]

    def acknowledge(self, client, records, offsets):
        assert len(offsets) == len(records), (client, offsets)
        self.acked.setdefault(client, []).extend(
            (offset, key, value) for offset, (key, value) in zip(offsets, records))

    def expected(self):
        """{partition: [(offset, key, value)]}: every acknowledged record, in offset order."""
        return {self.partition[c]: sorted(records, key=lambda r: r[0]) for c, records in self.acked.items()}

    def total(self):
        return sum(len(records) for records in self.acked.values())


def create_topic(cluster):
    """The topic, grown until one broker leads a partition for every producer; returns that broker
    and the partitions it leads."""
    admin = AdminClient({"bootstrap.servers": bootstraps(cluster)})
    admin.create_topics([NewTopic(TOPIC, INITIAL_PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    partitions = INITIAL_PARTITIONS

    def settled():
        view = describe(cluster.brokers[0].bootstrap, TOPIC)
        return view if len(view) == partitions and all(
            leader >= 0 and isr == [0, 1, 2] for leader, _, isr in view.values()) else None

    for _ in range(4):
        view = wait_for(settled, 20, f"{partitions} partitions led with a full ISR")
        led = {}
        for partition, (leader, _, _) in sorted(view.items()):
            led.setdefault(leader, []).append(partition)
        victim = max(led, key=lambda b: len(led[b]))
        if len(led[victim]) >= len(PRODUCERS):
            return victim, led[victim][:len(PRODUCERS)]
        partitions += len(PRODUCERS)
        admin.create_partitions([NewPartitions(TOPIC, partitions)])[TOPIC].result(30)
    raise AssertionError(f"no broker leads {len(PRODUCERS)} partitions of {partitions}: {led}")


# --- producers ----------------------------------------------------------------------------------

def confluent_producer(bootstrap):
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                     "linger.ms": 5, "message.timeout.ms": 60000, "retry.backoff.ms": 100})


def confluent_produce(producer, partition, records):
    offsets, errors = {}, []

    def delivered(error, message):
        if error is None:
            offsets[message.value()] = message.offset()
        else:
            errors.append(str(error))

    for key, value in records:
        producer.produce(TOPIC, key=key, value=value, partition=partition, on_delivery=delivered)
    assert producer.flush(60) == 0, "confluent-kafka: records left unacknowledged"
    assert not errors, errors
    return [offsets[value] for _, value in records]


def kp_producer(bootstrap, api_version):
    from kafka import KafkaProducer

    kwargs = {"bootstrap_servers": bootstrap, "acks": "all", "linger_ms": 5, "retries": 30,
              "retry_backoff_ms": 200, "request_timeout_ms": 15000,
              "max_in_flight_requests_per_connection": 1}
    if api_version is not None:
        kwargs["api_version"] = api_version
    return KafkaProducer(**kwargs)


def kp_produce(producer, partition, records):
    futures = [producer.send(TOPIC, key=key, value=value, partition=partition) for key, value in records]
    producer.flush(timeout=60)
    return [future.get(timeout=60).offset for future in futures]


def kcat_produce(bootstrap, partition, records, legacy):
    """kcat -P with acks=all (legacy: Produce v1 with acks -1); returns the acknowledged offsets."""
    args = ["kcat", "-b", bootstrap, "-P", "-v", "-v", "-t", TOPIC, "-p", str(partition), "-K", "\t",
            "-X", "acks=all", "-X", "topic.produce.offset.report=true", "-X", "message.timeout.ms=60000",
            *(KCAT_LEGACY if legacy else [])]
    data = b"".join(key + b"\t" + value + b"\n" for key, value in records)
    result = subprocess.run(args, input=data, timeout=90, capture_output=True)
    stderr = result.stderr.decode(errors="replace")
    assert result.returncode == 0 and "Delivery failed" not in stderr, (legacy, result.returncode, stderr)
    # -v -v with offset reports: a line per acknowledged record
    return [int(offset) for offset in re.findall(r"Message delivered to partition \d+ \(offset (\d+)\)", stderr)]


def node_produce(bootstrap, partition, records):
    # kafka-node's default ackTimeoutMs (100 ms) is the request's timeout: a first acks=-1 write to
    # a new partition can take longer (its followers are just starting) and gets REQUEST_TIMED_OUT.
    answer = node("produce", bootstrap=bootstrap, topic=TOPIC, partition=partition, requireAcks=-1,
                  ackTimeoutMs=30000, messages=[[k.decode(), v.decode()] for k, v in records], timeoutMs=60000)
    # {topic: {partition: base offset}}
    base = answer["result"][TOPIC][str(partition)]
    return list(range(base, base + len(records)))


def java_producer_commands(matrix, first):
    """kafka-clients 4.x producer, console producer and perf test (acks=all), one partition each."""
    bootstrap = matrix.all_bootstraps
    java = batch("java", first)
    console = batch("console-producer", first)
    perf_partition = matrix.partition["perf-test"]
    return {
        "java": ["skiff.PartitionProducer", bootstrap, TOPIC, matrix.partition["java"], lines_file(java)],
        "console-producer": [
            "<" + lines_file(console), CONSOLE_PRODUCER, "--bootstrap-server", bootstrap, "--topic", TOPIC,
            # --timeout is its linger.ms (1000 by default: a second per record with --sync)
            "--request-required-acks", "all", "--sync", "--timeout", 5,
            "--command-property", "partitioner.class=skiff.FixedPartitioner",
            "--command-property", f"skiff.partition={matrix.partition['console-producer']}",
            "--reader-property", "parse.key=true"],
        "perf-test": [
            PRODUCER_PERF, "--bootstrap-server", bootstrap, "--topic", TOPIC,
            "--num-records", FIRST if first else SECOND, "--payload-monotonic", "--throughput", -1,
            "--command-property", "acks=all", "partitioner.class=skiff.FixedPartitioner",
            f"skiff.partition={perf_partition}", "linger.ms=5"],
    }


def check_java_producers(matrix, runs, first):
    status, out, err = runs["java"]
    assert status == 0, f"Java producer exited {status}:\n{out}\n{err[-4000:]}"
    offsets = [int(line.split()[1]) for line in out.splitlines() if line.startswith("ACK ")]
    matrix.acknowledge("java", batch("java", first), offsets)
    # The console producer (--sync: a failed send ends it) and the perf test (it prints the
    # exception) print no offsets: their records follow the partition's earlier ones, which the
    # consumers check.
    for client in ("console-producer", "perf-test"):
        status, out, err = runs[client]
        assert status == 0 and "Exception" not in err and "Error" not in err, \
            f"{client} exited {status}:\n{out}\n{err[-4000:]}"
        records = batch(client, first)
        start = len(matrix.acked.get(client, []))
        matrix.acknowledge(client, records, list(range(start, start + len(records))))
    status, out, _ = runs["perf-test"]
    assert re.search(rf"^{FIRST if first else SECOND} records sent", out, re.M), out


def java_legacy(legacy_classes, *args, version=LEGACY_JAVA):
    code, stdout, stderr = run_java(legacy_classes(version), legacy_classpath(version),
                                    "skiff.legacy.PartitionClient", *args)
    assert code == 0, f"kafka-clients {version} {args[0]} failed ({code}):\n{stdout}\n{stderr[-6000:]}"
    return stdout


def produce_everywhere(matrix, java_classes, legacy_classes, first, extra_tools=()):
    """Every client writes its batch to its partition and records its acknowledgements; Kafka's
    tools run in one JVM, with `extra_tools` ({name: command}) after the producers."""
    bootstrap = matrix.all_bootstraps
    producers = matrix.in_process_producers
    if first:
        producers["confluent"] = confluent_producer(bootstrap)
        for client, api_version in KP_VERSIONS.items():
            producers[client] = kp_producer(bootstrap, api_version)
    records = batch("confluent", first)
    matrix.acknowledge("confluent", records,
                       confluent_produce(producers["confluent"], matrix.partition["confluent"], records))
    for client in KP_VERSIONS:
        records = batch(client, first)
        matrix.acknowledge(client, records, kp_produce(producers[client], matrix.partition[client], records))
    for client, legacy in (("kcat", False), ("kcat-legacy", True)):
        records = batch(client, first)
        offsets = kcat_produce(bootstrap, matrix.partition[client], records, legacy)
        matrix.acknowledge(client, records, sorted(offsets))
    records = batch("node", first)
    matrix.acknowledge("node", records, node_produce(bootstrap, matrix.partition["node"], records))
    records = batch("java-0.10", first)
    out = java_legacy(legacy_classes, "produce", bootstrap, TOPIC, matrix.partition["java-0.10"], lines_file(records))
    matrix.acknowledge("java-0.10", records, [int(l.split()[1]) for l in out.splitlines() if l.startswith("ACK ")])
    commands = {**java_producer_commands(matrix, first), **dict(extra_tools)}
    runs = dict(zip(commands, run_tools(java_classes, list(commands.values()))))
    check_java_producers(matrix, runs, first)
    return runs


# --- consumers ----------------------------------------------------------------------------------

def confluent_assigned(bootstrap, partitions):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "matrix-unused",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in partitions])
    return ("confluent", consumer)


def kp_assigned(bootstrap, partitions, api_version):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    kwargs = {"bootstrap_servers": bootstrap, "enable_auto_commit": False, "group_id": None,
              "metadata_max_age_ms": 1000, "request_timeout_ms": 15000}
    if api_version is not None:
        kwargs["api_version"] = api_version
    consumer = KafkaConsumer(**kwargs)
    tps = [KTP(TOPIC, p) for p in partitions]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    return ("kafka-python", consumer)


def poll(handle, count, timeout_s=DEADLINE_S):
    """Up to `count` more records from an assigned consumer: [(partition, offset, key, value)]."""
    kind, consumer = handle
    seen = []
    deadline = time.monotonic() + timeout_s
    while len(seen) < count and time.monotonic() < deadline:
        if kind == "confluent":
            message = consumer.poll(0.5)
            if message is None or (message.error() and message.error().code() == KafkaError._PARTITION_EOF):
                continue
            assert not message.error(), message.error()
            seen.append((message.partition(), message.offset(), message.key(), message.value()))
        else:
            for records in consumer.poll(timeout_ms=500).values():
                seen.extend((r.partition, r.offset, r.key, r.value) for r in records)
    return seen


def close(handle):
    handle[1].close()


def by_partition(seen):
    out = {}
    for partition, offset, key, value in seen:
        out.setdefault(partition, []).append((offset, key, value))
    return out


def assert_read_exactly(matrix, who, seen, upto=None):
    """`seen` (in arrival order) holds every acknowledged record of every producer's partition
    once, in offset order, and nothing else; `upto` limits it to the first records of each."""
    got = by_partition(seen)
    want = matrix.expected()
    if upto is not None:
        want = {p: records[:upto] for p, records in want.items()}
    for partition, records in want.items():
        read = got.get(partition, [])
        client = next(c for c, p in matrix.partition.items() if p == partition)
        assert read == records, (
            f"{who}: partition {partition} ({client}) read {len(read)} records, offsets "
            f"{[r[0] for r in read][:60]}, expected {len(records)} "
            f"(first difference: {next((i for i, (a, b) in enumerate(zip(read, records)) if a != b), None)})")
    extra = set(got) - set(want)
    assert not extra, f"{who}: records from partitions nobody wrote: {sorted(extra)}"


def kcat_read(bootstrap, count, legacy):
    args = ["kcat", "-b", bootstrap, "-C", "-t", TOPIC, "-o", "beginning", "-e", "-c", str(count),
            "-f", "%p\t%o\t%k\t%s\n", *(KCAT_LEGACY if legacy else [])]
    result = subprocess.run(args, timeout=DEADLINE_S + 30, capture_output=True)
    seen = []
    for line in result.stdout.split(b"\n"):
        if line:
            partition, offset, key, value = line.split(b"\t", 3)
            seen.append((int(partition), int(offset), key or None, value))
    return seen, result


# --- the shared cluster -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def matrix(etcd, java_classes, legacy_classes):
    cluster = start_replicated(etcd, REPLICA_SETTINGS + GROUP_SETTINGS)
    m = Matrix(cluster)
    try:
        ready(cluster)
        m.victim, partitions = create_topic(cluster)
        m.partition = dict(zip(PRODUCERS, partitions))
        used = sorted(partitions)
        produce_everywhere(m, java_classes, legacy_classes, first=True)
        assert all(len(m.acked[c]) == FIRST for c in PRODUCERS), {c: len(r) for c, r in m.acked.items()}

        # Consumers that read the first batch from the old leader and keep going after the kill.
        for name, handle in [("confluent", confluent_assigned(m.all_bootstraps, used)),
                             *[(client, kp_assigned(m.all_bootstraps, used, v)) for client, v in KP_VERSIONS.items()]]:
            seen = poll(handle, FIRST * len(PRODUCERS))
            m.long_lived[name] = (handle, seen)

        killed_at = time.monotonic()
        cluster.brokers[m.victim].stop(signal.SIGKILL)
        survivors = m.survivors()

        def moved():
            return all(all(leader not in (-1, m.victim) for p, (leader, _, _) in describe(b.bootstrap, TOPIC).items()
                           if p in used) for b in survivors)

        wait_for(moved, FAILOVER_BOUND_S, f"every producer's partition led by a survivor of broker {m.victim}")
        m.failover_s = time.monotonic() - killed_at

        # After the failover: every producer writes again (in-process ones unchanged), then
        # kafka-console-consumer reads everything as a group member, commits on close, and
        # kafka-consumer-groups reads the commits through a survivor it did not name before.
        total = len(PRODUCERS) * (FIRST + SECOND)
        consumer_tools = {
            "console-consumer": [
                CONSOLE_CONSUMER, "--bootstrap-server", m.all_bootstraps, "--topic", TOPIC,
                "--group", CONSOLE_GROUP, "--from-beginning", "--max-messages", total, "--timeout-ms", 30000,
                "--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true",
                "--formatter-property", "print.key=true"],
            "groups-describe": [GROUPS, "--bootstrap-server", survivors[1].bootstrap, "--describe",
                                "--group", CONSOLE_GROUP, "--offsets"],
        }
        m.tool_runs = produce_everywhere(m, java_classes, legacy_classes, first=False, extra_tools=consumer_tools)
        assert all(len(m.acked[c]) == FIRST + SECOND for c in PRODUCERS), {c: len(r) for c, r in m.acked.items()}
        yield m
    finally:
        for client, producer in m.in_process_producers.items():
            if client == "confluent":
                producer.flush(10)  # no close(): dropped below, before the brokers stop
            else:
                producer.close(timeout=10)
        m.in_process_producers.clear()
        for handle, _ in m.long_lived.values():
            close(handle)
        m.long_lived.clear()
        gc.collect()
        cluster.stop()


# --- tests --------------------------------------------------------------------------------------

def test_every_producer_was_acknowledged_with_acks_all_before_and_after_the_kill(matrix):
    for client in PRODUCERS:
        offsets = [offset for offset, _, _ in matrix.acked[client]]
        assert offsets == list(range(FIRST + SECOND)), (client, offsets)
    SUMMARY_LINES.append(f"replication clients: {len(PRODUCERS)} producers, broker {matrix.victim} killed, "
                         f"their partitions led by survivors {matrix.failover_s:.1f} s later")


@pytest.mark.parametrize("name", ["confluent", *KP_VERSIONS])
def test_a_consumer_reading_across_the_kill_gets_every_record_once(matrix, name):
    handle, before = matrix.long_lived[name]
    assert_read_exactly(matrix, f"{name} before the kill", before, upto=FIRST)
    after = poll(handle, SECOND * len(PRODUCERS))
    assert_read_exactly(matrix, f"{name} across the kill", before + after)


@pytest.mark.parametrize("api_version", [None, (0, 10, 1), (0, 10, 0), (0, 9)],
                         ids=["confluent", "kp-0.10.1", "kp-0.10.0", "kp-0.9"])
def test_a_fresh_python_consumer_reads_everything_from_the_new_leaders(matrix, api_version):
    used = sorted(matrix.partition.values())
    if api_version is None:
        handle = confluent_assigned(matrix.all_bootstraps, used)
    else:
        handle = kp_assigned(matrix.all_bootstraps, used, api_version)
    try:
        seen = poll(handle, matrix.total())
    finally:
        close(handle)
    assert_read_exactly(matrix, str(api_version or "confluent"), seen)


@pytest.mark.parametrize("legacy", [False, True], ids=["modern", "legacy"])
def test_kcat_reads_everything_from_the_new_leaders(matrix, legacy):
    seen, result = kcat_read(matrix.all_bootstraps, matrix.total(), legacy)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert_read_exactly(matrix, f"kcat {'legacy' if legacy else 'modern'}", seen)


def test_kafka_node_reads_everything_with_fetch_v0(matrix):
    """kafka-node's plain Consumer, one per leader. With partitions on several leaders it races
    itself: its flag "a fetch is in flight on this long-polling connection" is cleared by any
    answer on it (`handleReceivedData`, lib/baseClient.js), the ApiVersions of the connection's
    set-up included, so when one leader's answer starts the next round of fetches while another
    leader's connection is still being set up, that leader gets the same fetch twice and its
    records come twice (seen on a healthy cluster too; never with a single leader)."""
    expected = matrix.expected()
    leaders = {}
    for partition, (leader, _, _) in describe(matrix.survivors()[0].bootstrap, TOPIC).items():
        if partition in expected:
            leaders.setdefault(leader, []).append(partition)
    seen = []
    for leader, partitions in sorted(leaders.items()):
        answer = node("consume", bootstrap=matrix.all_bootstraps, topic=TOPIC, partitions=partitions,
                      count=sum(len(expected[p]) for p in partitions), timeoutMs=DEADLINE_S * 1000)
        seen += [(p, o, None if k is None else k.encode(), v.encode()) for p, o, k, v in answer["messages"]]
    assert_read_exactly(matrix, "kafka-node", seen)


@pytest.mark.parametrize("version", ["0.9.0.1", LEGACY_JAVA], ids=["0.9-fetch-v1", "0.10-fetch-v2"])
def test_an_old_java_consumer_reads_everything_from_the_new_leaders(matrix, legacy_classes, version):
    out = java_legacy(legacy_classes, "consume", matrix.all_bootstraps, TOPIC,
                      ",".join(map(str, sorted(matrix.partition.values()))), matrix.total(), version=version)
    seen = []
    for line in out.splitlines():
        if line.startswith("REC\t"):
            _, partition, offset, key, value = line.split("\t", 4)
            seen.append((int(partition), int(offset), None if key == "null" else key.encode(), value.encode()))
    assert_read_exactly(matrix, f"kafka-clients {version}", seen)


def test_console_consumer_reads_everything_and_its_commits_are_read_through_another_broker(matrix):
    status, out, err = matrix.tool_runs["console-consumer"]
    assert status == 0, f"console consumer exited {status}:\n{out}\n{err[-4000:]}"
    seen = []
    for line in out.splitlines():
        match = re.match(r"Partition:(\d+)\tOffset:(\d+)\t(.*?)\t(.*)$", line)
        if match:
            key = match.group(3)
            seen.append((int(match.group(1)), int(match.group(2)), None if key == "null" else key.encode(),
                         match.group(4).encode()))
    assert_read_exactly(matrix, "kafka-console-consumer", seen)
    status, out, err = matrix.tool_runs["groups-describe"]
    assert status == 0, f"kafka-consumer-groups exited {status}:\n{out}\n{err[-4000:]}"
    committed = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0] == CONSOLE_GROUP and fields[1] == TOPIC:
            committed[int(fields[2])] = (fields[3], fields[4])
    for partition in matrix.partition.values():
        assert committed.get(partition) == (str(FIRST + SECOND), str(FIRST + SECOND)), (partition, out)


def test_a_group_commits_after_the_failover_and_another_broker_reads_the_commit(matrix):
    one, other = matrix.survivors()
    consumer = Consumer({"bootstrap.servers": matrix.all_bootstraps, "group.id": CONFLUENT_GROUP,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
    consumer.subscribe([TOPIC])
    seen = []
    try:
        seen = poll(("confluent", consumer), matrix.total())
        assert_read_exactly(matrix, "confluent group", seen)

        def commit():
            try:
                return consumer.commit(asynchronous=False)
            except KafkaException as error:
                assert error.args[0].code() in RETRIABLE_COORDINATOR_ERRORS, error
                return None

        committed = wait_for(commit, 20, "an acknowledged commit")
        assert all(tp.error is None for tp in committed), committed
    finally:
        consumer.close()
    wanted = [TopicPartition(TOPIC, p) for p in sorted(matrix.partition.values())]
    for broker in (one, other):
        reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": CONFLUENT_GROUP,
                           "enable.auto.commit": False})
        try:
            found = reader.committed(wanted, timeout=10)
        finally:
            reader.close()
        assert [tp.offset for tp in found] == [FIRST + SECOND] * len(wanted), (broker.port, found)


def test_a_kafka_node_group_commits_after_the_failover_and_another_broker_reads_the_commit(matrix):
    """kafka-node's ConsumerGroup (group APIs v0, Fetch v2: magic 1, down-converted)."""
    group = "matrix-node"
    answer = node("group-consume", bootstrap=matrix.all_bootstraps, topic=TOPIC, group=group,
                  count=matrix.total(), commit=True, timeoutMs=DEADLINE_S * 1000)
    seen = [(p, o, None if k is None else k.encode(), v.encode()) for p, o, k, v in answer["messages"]]
    assert_read_exactly(matrix, "kafka-node group", seen)
    wanted = [TopicPartition(TOPIC, p) for p in sorted(matrix.partition.values())]
    for broker in matrix.survivors():
        reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            found = reader.committed(wanted, timeout=10)
        finally:
            reader.close()
        assert [tp.offset for tp in found] == [FIRST + SECOND] * len(wanted), (broker.port, found)
