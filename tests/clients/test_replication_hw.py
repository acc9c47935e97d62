"""Produce and fetch semantics on a replicated partition (issue 16 item 5), on 3 brokers and the
shared etcd, with raw requests (one answer, no client-side retries or caching) and real clients:

- consumers read below the high watermark (HW): with both followers paused (SIGSTOP) the leader
  takes acks=1 records its HW cannot pass; ListOffsets latest (v0, v1, librdkafka's) answers the
  HW (a replica id sees the log end) and a lookup by time finds no record above it; modern Fetch
  (v4, confluent-kafka) and legacy down-converted Fetch (v0-v3, kafka-python as a 0.10.1 and a
  0.9 client, kcat with the 0.9 protocol) stop there and report it, until the followers resume;
- a consumer Fetch parked at the HW with a long max_wait answers as soon as the HW passes a new
  record (not at the append, not at max_wait), whether followers replicated it or an ISR
  shrink moved the HW;
- a new leader deduplicates an idempotent producer's retries of batches it replicated as a
  follower (the original offsets, nothing appended twice) and answers a sequence gap with
  OUT_OF_ORDER_SEQUENCE_NUMBER;
- acks=all appended but not replicated in time answers REQUEST_TIMED_OUT at the request's
  timeout_ms, and NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrinks below
  min.insync.replicas before the HW passes it; the records stay in the log, as in Kafka.

`SKIFF_TEST_DUMP_LOGS=1` prints the brokers' logs after each test."""

import contextlib
import signal
import socket
import struct
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from clients import kcat_consume
from conftest import SUMMARY_LINES
from test_cluster import SESSION_MS, init_producer_id, wait_for
# replicated3 is a fixture: imported so that tests here can name it.
from test_replication import (TOPIC, batches_on_disk, create_rf3, describe, leader_of, list_latest,  # noqa: F401
                              replicated3, replicated_cluster)

# Paused followers keep their sessions (12 s) and their ISR places (lag 30 s) for the few seconds
# a test holds them: the HW stays where it was while the leader's log grows.
HOLD_SETTINGS = ("broker.session.timeout.ms=12000", "replica.lag.time.max.ms=30000",
                 "min.insync.replicas=2", "replica.fetch.wait.max.ms=200")
HOLD_SESSION_S = 12
# A follower paused for longer than its lag (4 s) leaves the ISR; its session (12 s) outlives that.
SHRINK_LAG_MS = 4000
SHRINK_SETTINGS = ("broker.session.timeout.ms=12000", f"replica.lag.time.max.ms={SHRINK_LAG_MS}",
                   "min.insync.replicas=2", "replica.fetch.wait.max.ms=200")

OFFSET_OUT_OF_RANGE = 1
LEADER_NOT_AVAILABLE = 5
OFFSET_NOT_AVAILABLE = 78
REQUEST_TIMED_OUT = 7
NOT_LEADER_OR_FOLLOWER = 6
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
CLIENT_ID = b"skiff-hw-test"


@pytest.fixture
def held3(etcd):
    yield from replicated_cluster(etcd, HOLD_SETTINGS)


@pytest.fixture
def shrinking3(etcd):
    yield from replicated_cluster(etcd, SHRINK_SETTINGS)


@contextlib.contextmanager
def paused(brokers):
    """SIGSTOPs `brokers` for the block; yields the time they were stopped."""
    for broker in brokers:
        broker.process.send_signal(signal.SIGSTOP)
    try:
        yield time.monotonic()
    finally:
        for broker in brokers:
            broker.process.send_signal(signal.SIGCONT)


# --- raw requests ------------------------------------------------------------------------------

def send_request(sock, api_key, version, correlation_id, body):
    header = struct.pack(">hhih", api_key, version, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)


def receive(sock, size):
    # A socket with a timeout is non-blocking underneath: MSG_WAITALL may return less.
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"connection closed after {len(data)} of {size} bytes"
        data += chunk
    return data


def read_response(sock, correlation_id):
    size, = struct.unpack(">i", receive(sock, 4))
    reader = Reader(receive(sock, size))
    assert reader.take(">i") == correlation_id
    return reader


def exchange(broker, api_key, version, body, timeout_s=20):
    with socket.create_connection((broker.host, broker.port), timeout=timeout_s) as sock:
        send_request(sock, api_key, version, 1, body)
        return read_response(sock, 1)


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return values[0] if len(values) == 1 else values

    def string(self):
        length = self.take(">h")
        value = self.data[self.at:self.at + length]
        self.at += max(length, 0)
        return value

    def bytes(self):
        length = self.take(">i")
        value = self.data[self.at:self.at + max(length, 0)]
        self.at += max(length, 0)
        return value


def topic_partition(partition=0):
    name = TOPIC.encode()
    return struct.pack(">ih", 1, len(name)) + name + struct.pack(">ii", 1, partition)


def list_offsets(broker, replica_id=-1, version=1, timestamp=-1):
    """ListOffsets of partition 0 (latest by default): v1's offset, or v0's list of offsets."""
    body = struct.pack(">i", replica_id) + topic_partition() + struct.pack(">q", timestamp)
    if version == 0:
        body += struct.pack(">i", 10)
    reader = exchange(broker, 2, version, body)
    assert reader.take(">i") == 1 and reader.string() == TOPIC.encode()
    assert reader.take(">i") == 1
    _partition, error = reader.take(">ih")
    assert error == 0, error
    if version == 0:
        return [reader.take(">q") for _ in range(reader.take(">i"))]
    _timestamp, offset = reader.take(">qq")
    return offset


# The magic each Fetch version reads: v0/v1 magic 0, v2/v3 magic 1 (down-converted), v4+ as stored.
FETCH_MAGIC = {0: 0, 1: 0, 2: 1, 3: 1, 4: 2}


def fetch_frame_body(version, offset, max_wait_ms, partition=0):
    body = struct.pack(">iii", -1, max_wait_ms, 1)
    if version >= 3:
        body += struct.pack(">i", 1 << 20)
    if version >= 4:
        body += struct.pack(">b", 0)
    name = TOPIC.encode()
    return body + struct.pack(">ih", 1, len(name)) + name + struct.pack(">iiqi", 1, partition, offset, 1 << 20)


def parse_fetch(reader, version):
    """(error, high watermark, [(offset, value)]) of partition 0; every record set has the
    version's magic."""
    if version >= 1:
        reader.take(">i")  # throttle
    assert reader.take(">i") == 1 and reader.string() == TOPIC.encode()
    assert reader.take(">i") == 1
    _partition, error, high_watermark = reader.take(">ihq")
    if version >= 4:
        reader.take(">q")  # last stable offset
        aborted = reader.take(">i")
        reader.at += 16 * max(aborted, 0)
    return error, high_watermark, records_of(reader.bytes(), FETCH_MAGIC[version])


def records_of(data, magic):
    from kafka.record.memory_records import MemoryRecords

    records = MemoryRecords(data)
    found = []
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        assert batch.magic == magic, (batch.magic, magic)
        found.extend((record.offset, record.value) for record in batch)
    return found


def raw_fetch(broker, version, offset, max_wait_ms=0):
    """(error, HW, records from `offset` on): a stored batch comes whole, and a client skips its
    records below the fetch offset."""
    error, high_watermark, records = parse_fetch(
        exchange(broker, 1, version, fetch_frame_body(version, offset, max_wait_ms)), version)
    return error, high_watermark, [record for record in records if record[0] >= offset]


class ParkedFetch:
    """A consumer Fetch sent now and answered on its own thread: (error, HW, records) and when."""

    def __init__(self, broker, version, offset, max_wait_ms):
        self.version = version
        self.sock = socket.create_connection((broker.host, broker.port), timeout=max_wait_ms / 1000 + 10)
        self.sent_at = time.monotonic()
        send_request(self.sock, 1, version, 1, fetch_frame_body(version, offset, max_wait_ms))
        self.answer = self.answered_at = self.failure = None
        self.thread = threading.Thread(target=self._wait, daemon=True)
        self.thread.start()

    def _wait(self):
        try:
            self.answer = parse_fetch(read_response(self.sock, 1), self.version)
        except Exception as error:  # noqa: BLE001 - reported by result()
            self.failure = error
        self.answered_at = time.monotonic()
        self.sock.close()

    def result(self, timeout_s):
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "the fetch never answered"
        assert self.failure is None, self.failure
        return self.answer


def produce_frame(records, acks, timeout_ms, correlation_id=1, partition=0):
    """The body of a Produce v3 of `records` (v2 batches) to one partition."""
    name = TOPIC.encode()
    body = struct.pack(">hhi", -1, acks, timeout_ms)  # transactional id null
    body += struct.pack(">ih", 1, len(name)) + name + struct.pack(">iii", 1, partition, len(records)) + records
    return body


def raw_produce(broker, records, acks=-1, timeout_ms=10_000):
    """The first answer of a Produce v3: (error code, base offset)."""
    reader = exchange(broker, 0, 3, produce_frame(records, acks, timeout_ms), timeout_s=timeout_ms / 1000 + 20)
    assert reader.take(">i") == 1 and reader.string() == TOPIC.encode()
    assert reader.take(">i") == 1
    _partition, error, base_offset = reader.take(">ihq")
    return error, base_offset


def produce_when_led(broker, records, timeout_s=15):
    """A raw acks=all Produce, repeated while `broker` answers NOT_LEADER_OR_FOLLOWER (Metadata
    may name it leader before its replica took the leadership over): the first other answer."""
    return wait_for(lambda: (lambda answer: answer if answer[0] != NOT_LEADER_OR_FOLLOWER else None)(
        raw_produce(broker, records)), timeout_s, "an answer from the leader")


def batch(values, producer_id=-1, epoch=-1, sequence=-1):
    from kafka.record.memory_records import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, producer_id=producer_id,
                                   producer_epoch=epoch, base_sequence=sequence)
    for value in values:
        builder.append(timestamp=None, key=None, value=value)
    builder.close()
    return bytes(builder.buffer())


def produce_acked(bootstrap, values, acks):
    """confluent-kafka: sends `values` to partition 0, every one acknowledged: their offsets."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                         "message.timeout.ms": 20000})
    offsets, errors = [], []

    def delivered(error, message):
        (errors if error else offsets).append(error or message.offset())

    for value in values:
        producer.produce(TOPIC, value=value, partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0 and not errors, errors
    return sorted(offsets)


# --- readers -----------------------------------------------------------------------------------

def confluent_read_to_end(bootstrap):
    """confluent-kafka (modern Fetch) from offset 0 until its end-of-partition event, which the
    client raises at the HW the fetch answers report: [(offset, value)] and that HW."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    # The watermarks as the last fetch answer said them (no ListOffsets).
                    _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), cached=True)
                    return seen, high
                continue
            seen.append((message.offset(), message.value()))
        raise AssertionError(f"no end of partition within 20 s (read {len(seen)})")
    finally:
        consumer.close()


def kafka_python_read(bootstrap, api_version, count):
    """kafka-python forced to an old protocol (down-converted fetches) from offset 0 until it
    read `count` records: [(offset, value)] and the HW its last fetch answer reported."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    # Short timeouts: kafka-python refreshes its metadata from any broker it knows, and a paused
    # follower answers nothing; its default 10 s wait there outlasted the followers' sessions
    # under CI load, and the HW moved when they left the ISR.
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=api_version,
                             enable_auto_commit=False, group_id=None, request_timeout_ms=2500,
                             session_timeout_ms=1000, heartbeat_interval_ms=300,
                             fetch_max_wait_ms=100)
    tp = KTP(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    seen = []
    deadline = time.monotonic() + 20
    try:
        while len(seen) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                seen.extend((record.offset, record.value) for record in records)
        return seen, consumer.highwater(tp)
    finally:
        consumer.close()


# --- 1. reads stop at the HW -------------------------------------------------------------------

def test_consumers_read_below_the_high_watermark_modern_and_down_converted(held3):
    cluster = held3
    create_rf3(cluster)
    leader = leader_of(cluster)
    lead = cluster.brokers[leader]
    followers = [b for i, b in enumerate(cluster.brokers) if i != leader]
    acked = produce_acked(lead.bootstrap, [b"acked-%d" % i for i in range(10)], "all")
    assert acked == list(range(10))
    hw = 10
    wait_for(lambda: list_offsets(lead) == hw, 10, "the HW at the acknowledged end")
    expected = [(offset, b"acked-%d" % offset) for offset in range(hw)]
    # A time after every acknowledged record's and at most the first record above the HW's.
    after_acked_ms = int(time.time() * 1000) + 1
    wait_for(lambda: time.time() * 1000 >= after_acked_ms, 1, "the next millisecond")
    with paused(followers) as paused_at:
        above = produce_acked(lead.bootstrap, [b"above-%d" % i for i in range(5)], "1")
        assert above == list(range(hw, hw + 5))
        log_end = hw + 5
        # The premise: the leader's log ends above the HW (a replica id sees the log end).
        assert list_offsets(lead, replica_id=leader) == log_end
        # ListOffsets latest, v1 and v0, and as librdkafka asks it: the HW.
        assert list_offsets(lead) == hw
        assert list_offsets(lead, version=0) == [hw, 0]
        assert list_latest(lead.bootstrap) == hw
        # By time: the first record at or after the time is above the HW, so none is found.
        assert list_offsets(lead, timestamp=after_acked_ms) == -1
        # Raw fetches: the records below the HW and the HW, modern and down-converted. From the
        # last offset below the HW as well: a down-converted set is cut at the size of the
        # stored slice (KIP-283), which from there leaves room for the records above the HW.
        for version in (0, 1, 2, 3, 4):
            assert raw_fetch(lead, version, 0) == (0, hw, expected), version
            assert raw_fetch(lead, version, hw - 1) == (0, hw, expected[-1:]), version
        # From the HW or between it and the log end: nothing, no error; past the log end: 1.
        assert raw_fetch(lead, 4, hw) == (0, hw, [])
        assert raw_fetch(lead, 4, hw + 2) == (0, hw, [])
        assert raw_fetch(lead, 0, hw + 2) == (0, hw, [])
        assert raw_fetch(lead, 4, log_end + 1)[0] == OFFSET_OUT_OF_RANGE
        # Real clients: each reads exactly the records below the HW.
        assert confluent_read_to_end(lead.bootstrap) == (expected, hw)
        for api_version in ((0, 10, 1), (0, 9)):
            seen, reported = kafka_python_read(lead.bootstrap, api_version, hw)
            assert (seen, reported) == (expected, hw), api_version
        for legacy in (False, True):
            seen, stderr = kcat_consume(lead.bootstrap, TOPIC, 100, legacy=legacy)
            assert [(o, v) for o, _, v in seen] == expected, (legacy, stderr[-500:])
        held_for = time.monotonic() - paused_at
    # The premise held: the followers kept their sessions (and so their ISR places) throughout.
    assert held_for < HOLD_SESSION_S - 2, held_for
    wait_for(lambda: list_offsets(lead) == log_end, 15, "the HW at the log end after the followers resumed")
    assert list_offsets(lead, timestamp=after_acked_ms) == hw
    everything = expected + [(offset, b"above-%d" % (offset - hw)) for offset in range(hw, log_end)]
    assert raw_fetch(lead, 4, 0) == (0, log_end, everything)
    for version in (0, 1, 2, 3, 4):
        assert raw_fetch(lead, version, hw - 1) == (0, log_end, everything[hw - 1:]), version
    assert confluent_read_to_end(lead.bootstrap) == (everything, log_end)
    seen, reported = kafka_python_read(lead.bootstrap, (0, 9), log_end)
    assert (seen, reported) == (everything, log_end)
    seen, _ = kcat_consume(lead.bootstrap, TOPIC, 100, legacy=True)
    assert [(o, v) for o, _, v in seen] == everything
    SUMMARY_LINES.append(f"replication HW: reads capped at the HW for {held_for:.1f} s of paused followers "
                         "(ListOffsets v0/v1, Fetch v0-v4, confluent-kafka, kafka-python 0.10.1/0.9, kcat)")


# --- 2. a parked fetch wakes when the HW passes a record --------------------------------------

MAX_WAIT_MS = 10_000
# Far below max_wait: the HW moves within a few follower round trips (replica.fetch.wait.max.ms 200).
WAKE_BOUND_S = 3.0


def test_a_fetch_parked_at_the_hw_answers_when_the_hw_moves_not_at_max_wait(held3):
    cluster = held3
    create_rf3(cluster)
    leader = leader_of(cluster)
    lead = cluster.brokers[leader]
    followers = [b for i, b in enumerate(cluster.brokers) if i != leader]
    assert produce_acked(lead.bootstrap, [b"first-%d" % i for i in range(3)], "all") == [0, 1, 2]
    wait_for(lambda: list_offsets(lead) == 3, 10, "the HW at 3")

    # (a) acks=1 while the followers are paused: the append alone must not answer the parked
    # fetches (the record is above the HW); the followers' resumption moves the HW and does.
    with paused(followers):
        fetches = [ParkedFetch(lead, version, 3, MAX_WAIT_MS) for version in (4, 2)]
        assert produce_acked(lead.bootstrap, [b"second"], "1") == [3]
        assert list_offsets(lead, replica_id=leader) == 4 and list_offsets(lead) == 3
        assert [f.answered_at for f in fetches] == [None, None], [f.answer for f in fetches]
        resumed_at = time.monotonic()
    for fetch in fetches:
        assert fetch.result(MAX_WAIT_MS / 1000 + 5) == (0, 4, [(3, b"second")]), fetch.version
    waits_a = [f.answered_at - resumed_at for f in fetches]
    assert all(0 < wait < WAKE_BOUND_S for wait in waits_a), waits_a

    # (b) acks=all with the followers running: the answer follows the acknowledgement closely.
    fetch = ParkedFetch(lead, 4, 4, MAX_WAIT_MS)
    sent_at = time.monotonic()
    assert produce_acked(lead.bootstrap, [b"third"], "all") == [4]
    acked_at = time.monotonic()
    assert fetch.result(MAX_WAIT_MS / 1000 + 5) == (0, 5, [(4, b"third")])
    wait_b = fetch.answered_at - sent_at
    assert wait_b < WAKE_BOUND_S, (wait_b, acked_at - sent_at)
    SUMMARY_LINES.append(f"replication HW: fetches parked at the HW (max_wait {MAX_WAIT_MS} ms) answered "
                         f"{max(waits_a) * 1000:.0f} ms after the followers resumed, {wait_b * 1000:.0f} ms "
                         "after an acks=all send")


# --- 3. a new leader deduplicates idempotent retries -------------------------------------------



def list_offsets_answer(broker, version, partition):
    """(error, offset) of a consumer's ListOffsets latest of `partition`, v1 or v5 (v2+: isolation
    level; v4+: current leader epoch −1, the answer's leader epoch)."""
    name = TOPIC.encode()
    body = struct.pack(">i", -1)
    if version >= 2:
        body += struct.pack(">b", 0)
    body += struct.pack(">ih", 1, len(name)) + name + struct.pack(">ii", 1, partition)
    if version >= 4:
        body += struct.pack(">i", -1)
    body += struct.pack(">q", -1)
    reader = exchange(broker, 2, version, body)
    if version >= 2:
        reader.take(">i")  # throttle
    assert reader.take(">i") == 1 and reader.string() == name
    assert reader.take(">i") == 1
    _partition, error, _timestamp, offset = reader.take(">ihqq")
    return error, offset


def test_a_new_leader_answers_latest_with_offset_not_available_until_its_hw_reaches_its_epoch(held3):
    """KIP-207: records the old leader took with acks=1 reach its successor but not the paused
    third replica, so the successor's epoch starts above its HW; until the third replica fetches,
    a consumer's ListOffsets latest gets OFFSET_NOT_AVAILABLE (v5+) or LEADER_NOT_AVAILABLE (v1-v4)
    instead of an offset below what the old leader could have answered."""
    cluster = held3
    admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(30)
    views = wait_for(lambda: (lambda v: v if all(l >= 0 and isr == [0, 1, 2] for l, _, isr in v.values())
                              else None)(describe(cluster.brokers[0].bootstrap)), 15, "3 partitions led")
    controller = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap}) \
        .list_topics(timeout=10).controller_id
    replicas = {p: AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap}).list_topics(
        TOPIC, timeout=10).topics[TOPIC].partitions[p].replicas for p in views}
    # The controller must not be the paused one: a partition whose third replica is another.
    partition = next((p for p, r in replicas.items() if views[p][0] == r[0] and r[2] != controller), None)
    assert partition is not None, (replicas, views, controller)
    leader_id, successor_id, paused_id = replicas[partition]
    lead, successor, third = (cluster.brokers[i] for i in (leader_id, successor_id, paused_id))
    producer = Producer({"bootstrap.servers": lead.bootstrap, "acks": "all", "linger.ms": 0})
    for index in range(10):
        producer.produce(TOPIC, value=b"acked-%d" % index, partition=partition)
    assert producer.flush(20) == 0
    with paused([third]):
        acks1 = Producer({"bootstrap.servers": lead.bootstrap, "acks": "1", "linger.ms": 0})
        for index in range(5):
            acks1.produce(TOPIC, value=b"above-%d" % index, partition=partition)
        assert acks1.flush(20) == 0
        wait_for(lambda: log_end_on_disk(cluster.dirs[successor_id], partition) == 15, 10,
                 "the successor holds the 5 records above the HW")
        # Controlled shutdown: the controller hands the lead to the first running ISR member.
        lead.stop()
        wait_for(lambda: describe(successor.bootstrap)[partition][0] == successor_id, 15, "the successor leads")
        # Its Metadata may name it a moment before it has applied the leadership (NOT_LEADER
        # then, as Kafka answers in that window).
        wait_for(lambda: list_offsets_answer(successor, 5, partition)[0] != NOT_LEADER_OR_FOLLOWER, 10,
                 "the successor applying its leadership")
        assert list_offsets_answer(successor, 5, partition) == (OFFSET_NOT_AVAILABLE, -1)
        assert list_offsets_answer(successor, 1, partition) == (LEADER_NOT_AVAILABLE, -1)
        assert list_offsets_replica(successor, successor_id, partition) == 15
    # The third replica fetches from the successor: the HW reaches the epoch's start.
    wait_for(lambda: list_offsets_answer(successor, 5, partition) == (0, 15), 15, "latest answered again")
    assert list_offsets_answer(successor, 1, partition) == (0, 15)


def log_end_on_disk(data_dir, partition):
    batches = batches_on_disk(data_dir, partition)
    return batches[-1][0] + batches[-1][1] + 1 if batches else 0


def list_offsets_replica(broker, replica_id, partition):
    """A replica's ListOffsets v1 latest of `partition`: the log end."""
    name = TOPIC.encode()
    body = struct.pack(">i", replica_id) + struct.pack(">ih", 1, len(name)) + name + \
        struct.pack(">iiq", 1, partition, -1)
    reader = exchange(broker, 2, 1, body)
    assert reader.take(">i") == 1 and reader.string() == name
    assert reader.take(">i") == 1
    _partition, error, _timestamp, offset = reader.take(">ihqq")
    assert error == 0, error
    return offset


def test_a_new_leader_answers_idempotent_retries_with_the_original_offsets(replicated3):
    """A 3 s session: a killed leader is replaced within seconds."""
    cluster = replicated3
    create_rf3(cluster)
    leader = leader_of(cluster)
    lead = cluster.brokers[leader]
    producer_id = init_producer_id(lead.bootstrap)
    first = batch([b"a-0", b"a-1", b"a-2"], producer_id, 0, 0)
    second = batch([b"b-0", b"b-1"], producer_id, 0, 3)
    assert produce_when_led(lead, first) == (0, 0)
    assert raw_produce(lead, second) == (0, 3)
    assert raw_produce(lead, second) == (0, 3), "the leader itself deduplicates"
    # acks=all with a full ISR: both followers hold both batches.
    wait_for(lambda: all(len(batches_on_disk(d)) == 2 for d in cluster.dirs), 10, "both batches on every replica")
    lead.stop(signal.SIGKILL)
    killed_at = time.monotonic()
    successor = wait_for(lambda: (lambda l: l if l not in (-1, leader) else None)(leader_of(cluster)),
                         SESSION_MS / 1000 + 10, "a new leader")
    new = cluster.brokers[successor]
    # Retries of both batches (the producer never saw their answers): their original offsets.
    assert produce_when_led(new, second) == (0, 3)
    failed_over_s = time.monotonic() - killed_at
    assert raw_produce(new, first) == (0, 0)
    assert list_offsets(new, replica_id=successor) == 5, "a retry was appended again"
    # The next sequence continues the log; a gap is refused and appends nothing.
    assert raw_produce(new, batch([b"c-0"], producer_id, 0, 5)) == (0, 5)
    error, _ = raw_produce(new, batch([b"gap"], producer_id, 0, 9))
    assert error == OUT_OF_ORDER_SEQUENCE_NUMBER, error
    assert list_offsets(new, replica_id=successor) == 6
    values = [b"a-0", b"a-1", b"a-2", b"b-0", b"b-1", b"c-0"]
    assert raw_fetch(new, 4, 0) == (0, 6, list(enumerate(values)))
    SUMMARY_LINES.append(f"replication HW: idempotent retries deduplicated by the new leader "
                         f"{failed_over_s:.1f} s after the old one was killed")


# --- 4. acks=all answered after the append -----------------------------------------------------

def test_acks_all_times_out_at_timeout_ms_and_says_not_enough_replicas_after_append(shrinking3):
    """min.insync.replicas=3 on an RF 3 topic: with one follower paused, an acks=all produce is
    admitted (the ISR is still 3) and appended. Its timeout_ms (1 s, well below the follower's
    lag) passes first: REQUEST_TIMED_OUT. A second one with a long timeout waits until the
    follower leaves the ISR: the HW then passes it with 2 in-sync replicas of the 3 required,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND, and a consumer fetch parked at the HW answers then. Both
    produces keep their offsets; both records stay in the log."""
    cluster = shrinking3
    admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "3"})])[TOPIC].result(30)
    wait_for(lambda: describe(cluster.brokers[0].bootstrap)[0][2] == [0, 1, 2], 15, "a full ISR")
    leader = leader_of(cluster)
    lead = cluster.brokers[leader]
    follower_index = (leader + 1) % 3
    assert produce_when_led(lead, batch([b"in-sync"])) == (0, 0)
    with paused([cluster.brokers[follower_index]]) as paused_at:
        # A consumer parked at the HW meanwhile: only the ISR shrink moves the HW.
        parked = ParkedFetch(lead, 4, 1, 20_000)
        started = time.monotonic()
        assert raw_produce(lead, batch([b"timed-out"]), timeout_ms=1000) == (REQUEST_TIMED_OUT, 1)
        timed_out_after = time.monotonic() - started
        # Answered at its own deadline (the leader polls them every 100 ms), not by the
        # handler's backstop 5 s later, and before the follower could have left the ISR.
        assert 0.9 <= timed_out_after < 2.5, timed_out_after
        assert describe(lead.bootstrap)[0][2] == [0, 1, 2]
        answer = raw_produce(lead, batch([b"after-append"]), timeout_ms=30_000)
        answered_at = time.monotonic()
        shrunk_after = answered_at - paused_at
        assert answer == (NOT_ENOUGH_REPLICAS_AFTER_APPEND, 2), answer
        # The HW's jump at the shrink answered the parked fetch too, long before its max_wait.
        assert parked.result(25) == (0, 3, [(1, b"timed-out"), (2, b"after-append")])
        assert abs(parked.answered_at - answered_at) < 1.0, parked.answered_at - answered_at
        # The follower's last fetch before the pause counts as caught up (up to a parked
        # replica fetch, 200 ms, earlier); the leader checks every lag/2.
        assert SHRINK_LAG_MS / 1000 - 0.5 <= shrunk_after < SHRINK_LAG_MS / 1000 + 5, shrunk_after
        assert describe(lead.bootstrap)[0][2] == sorted({0, 1, 2} - {follower_index})
    wait_for(lambda: describe(lead.bootstrap)[0][2] == [0, 1, 2], 20, "the follower back in the ISR")
    wait_for(lambda: list_offsets(lead) == 3, 10, "the HW past both records")
    assert raw_fetch(lead, 4, 0) == (0, 3, [(0, b"in-sync"), (1, b"timed-out"), (2, b"after-append")])
    wait_for(lambda: len({tuple(batches_on_disk(d)) for d in cluster.dirs}) == 1, 10, "identical replicas")
    SUMMARY_LINES.append(f"replication HW: acks=all REQUEST_TIMED_OUT after {timed_out_after:.2f} s "
                         f"(timeout_ms 1000), NOT_ENOUGH_REPLICAS_AFTER_APPEND {shrunk_after:.1f} s into a "
                         f"follower's pause (lag {SHRINK_LAG_MS} ms)")
