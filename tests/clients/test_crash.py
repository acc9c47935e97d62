"""Crash safety of the whole broker, with real clients.

`test_sigkill_cycles`: a modern idempotent producer (confluent-kafka, acks=all), a legacy producer
(kafka-python forced to 0.10.1, acks=all, not idempotent) and a kafka-python group consumer that
commits its positions run while the broker is killed with SIGKILL at seeded random moments and
restarted on the same port and data, CRASH_CYCLES times. What it asserts:

- modern topic (idempotent producer): every acknowledged message is present, at the offset its
  acknowledgement named, and every message present is there exactly once, in order, with no gap;
- legacy topic (no idempotence, so a send that failed is retried by the test with the same number):
  every acknowledged message is present at its acknowledged offset; per partition the numbers,
  with adjacent repeats collapsed, are exactly the numbers sent there, in order; a number appears
  more than once only if its send failed and was retried (a write whose answer was lost in the
  crash) -- any other repeat is a broker bug;
- both read back from offset 0 by a fresh modern consumer and a fresh legacy (0.10.1) consumer,
  which must agree;
- committed offsets: every commit the broker acknowledged is recorded; after each restart
  OffsetFetch returns at least the highest one acknowledged before the kill, and the consumer's
  acknowledged commits never go backwards.

`SKIFF_CRASH_SEED` replays a run's kill schedule (the moments of the kills; the clients' threads
interleave as the machine lets them); `SKIFF_CRASH_CYCLES` changes the cycle count (20 by
default). The seed, cycle count and run time are printed in pytest's summary.

SIGKILL ends the process, not the host: what reached the page cache survives, so this test checks
the broker's and storage's own logic (acknowledge only what is appended, recover a torn tail, replay
producer state and committed offsets), not fsync ordering; `log.flush.interval.messages=1` is set
anyway so an acknowledgement also means on disk.

`test_disk_full`: `log.dirs` on an 8 MiB tmpfs; producers get a clear error once it is full, and
after a restart on a larger copy of the same data everything acknowledged is read back.
"""

import collections
import os
import random
import shutil
import signal
import subprocess
import threading
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaStorageError
from kafka.structs import OffsetAndMetadata

from clients import kp_consume
from conftest import SUMMARY_LINES, Broker

CRASH_CYCLES = int(os.environ.get("SKIFF_CRASH_CYCLES", "20"))
PARTITION_COUNT = 3
RUN_BETWEEN_KILLS_S = (0.3, 1.8)
GROUP = "crash-g"
MODERN_TOPIC = "crash-modern"
LEGACY_TOPIC = "crash-legacy"
LEGACY_API = (0, 10, 1)
VALUE_BYTES = 120
MODERN_OUTSTANDING_MAX = 300
SEND_TIMEOUT_S = 10
FINAL_DRAIN_S = 60
# Bound on waiting for the clients to make progress at the start and after the last restart.
PROGRESS_TIMEOUT_S = 30
# Kills come every 0.3-1.8 s; with Kafka's 3 s initial rebalance delay the group would rarely
# form between two kills and commit little, so the test shortens it (as Kafka's own tests do).
BROKER_SETTINGS = ("log.flush.interval.messages=1", f"num.partitions={PARTITION_COUNT}",
                   "group.initial.rebalance.delay.ms=200")


def key_of(tag, number):
    return f"{tag}-{number}".encode()


def value_of(tag, number):
    body = f"{tag}-value-{number}-".encode()
    return (body * (VALUE_BYTES // len(body) + 1))[:VALUE_BYTES]


def number_of(key):
    return int(key.decode().rsplit("-", 1)[1])


def create_topics(bootstrap, names):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, PARTITION_COUNT, 1) for name in names])
    finally:
        admin.close()


class ModernProducer(threading.Thread):
    """confluent-kafka, idempotent, acks=all; keeps up to MODERN_OUTSTANDING_MAX messages queued and
    lets librdkafka retry them across the crash."""

    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
            "retry.backoff.ms": 50,
        })
        self.stop_event = threading.Event()
        self.produced = 0
        self.acked = {}  # number -> (partition, offset)
        self.errors = []
        self.fatal = None

    def _delivered(self, error, message):
        number = number_of(message.key())
        if error is not None:
            self.errors.append((number, str(error)))
        else:
            self.acked[number] = (message.partition(), message.offset())

    def run(self):
        try:
            while not self.stop_event.is_set():
                if self.produced - len(self.acked) - len(self.errors) >= MODERN_OUTSTANDING_MAX:
                    self.producer.poll(0.05)
                    continue
                number = self.produced
                self.producer.produce(
                    MODERN_TOPIC, key=key_of("M", number), value=value_of("M", number),
                    partition=number % PARTITION_COUNT, on_delivery=self._delivered)
                self.produced += 1
                self.producer.poll(0)
            self.remaining = self.producer.flush(FINAL_DRAIN_S)
        except Exception as error:  # noqa: BLE001 - reported by the test
            self.fatal = repr(error)


class LegacyProducer(threading.Thread):
    """kafka-python as a 0.10.1 client, acks=all, no idempotence. One message in flight per
    partition: a failed send is retried with the same number before the next number for that
    partition is sent, so a retry can only repeat a message next to itself."""

    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.stop_event = threading.Event()
        self.next_index = [0] * PARTITION_COUNT  # per partition; number = index * count + partition
        self.acked = {}
        self.attempts = {}  # number -> sends tried
        self.failures = []
        self.fatal = None

    def _producer(self):
        return KafkaProducer(
            bootstrap_servers=self.bootstrap, api_version=LEGACY_API, acks="all", retries=0,
            linger_ms=2, max_in_flight_requests_per_connection=1, max_block_ms=5000,
            request_timeout_ms=5000, reconnect_backoff_ms=50, reconnect_backoff_max_ms=500)

    def run(self):
        producer = None
        try:
            # After a stop request, finish the messages already numbered (each is retried until
            # acknowledged), so nothing is left half sent.
            while True:
                stopping = self.stop_event.is_set()
                pending = [
                    index * PARTITION_COUNT + partition
                    for partition, index in enumerate(self.next_index)
                    if not stopping or self.attempts.get(index * PARTITION_COUNT + partition)
                ]
                if not pending:
                    break
                if producer is None:
                    try:
                        producer = self._producer()
                    except Exception as error:  # noqa: BLE001 - the broker is down: try again
                        self.failures.append(repr(error))
                        time.sleep(0.1)
                        continue
                futures = {}
                for number in pending:
                    self.attempts[number] = self.attempts.get(number, 0) + 1
                    try:
                        futures[number] = producer.send(
                            LEGACY_TOPIC, key=key_of("L", number), value=value_of("L", number),
                            partition=number % PARTITION_COUNT)
                    except Exception as error:  # noqa: BLE001
                        self.failures.append(repr(error))
                for number, future in futures.items():
                    try:
                        metadata = future.get(timeout=SEND_TIMEOUT_S)
                    except Exception as error:  # noqa: BLE001 - retried next round
                        self.failures.append(repr(error))
                        continue
                    assert metadata.partition == number % PARTITION_COUNT
                    self.acked[number] = (metadata.partition, metadata.offset)
                    self.next_index[number % PARTITION_COUNT] += 1
                if any(number not in self.acked for number in pending):
                    time.sleep(0.05)
        except Exception as error:  # noqa: BLE001 - reported by the test
            self.fatal = repr(error)
        finally:
            if producer is not None:
                producer.close(timeout=1)

    def sent_numbers(self, partition):
        """Every number handed to a send for `partition` (acknowledged or still being retried)."""
        return [index * PARTITION_COUNT + partition
                for index in range(self.next_index[partition] + 1)
                if index * PARTITION_COUNT + partition in self.attempts]


class GroupConsumer(threading.Thread):
    """kafka-python group member on both topics, committing its positions after every poll."""

    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.commits = {}  # (topic, partition) -> [acknowledged committed offsets, in order]
        self.consumed = 0
        self.commit_failures = 0
        self.last_error = None
        self.fatal = None

    def highest(self):
        with self.lock:
            return {tp: max(offsets) for tp, offsets in self.commits.items() if offsets}

    def run(self):
        consumer = None
        try:
            while not self.stop_event.is_set():
                if consumer is None:
                    try:
                        consumer = KafkaConsumer(
                            bootstrap_servers=self.bootstrap, group_id=GROUP,
                            enable_auto_commit=False, auto_offset_reset="earliest",
                            session_timeout_ms=6000, heartbeat_interval_ms=1000,
                            reconnect_backoff_ms=50, reconnect_backoff_max_ms=500,
                            request_timeout_ms=8000)
                        consumer.subscribe([MODERN_TOPIC, LEGACY_TOPIC])
                    except Exception:  # noqa: BLE001 - the broker is down: try again
                        time.sleep(0.1)
                        continue
                try:
                    batch = consumer.poll(timeout_ms=200)
                    self.consumed += sum(len(records) for records in batch.values())
                    positions = {tp: consumer.position(tp) for tp in consumer.assignment()}
                    if not positions:
                        continue
                    consumer.commit(
                        {tp: OffsetAndMetadata(offset, "", -1) for tp, offset in positions.items()},
                        timeout_ms=5000)
                except Exception as error:  # noqa: BLE001 - crash in progress: the member rejoins
                    self.commit_failures += 1
                    self.last_error = repr(error)
                    time.sleep(0.05)
                    continue
                with self.lock:
                    for tp, offset in positions.items():
                        self.commits.setdefault((tp.topic, tp.partition), []).append(offset)
        except Exception as error:  # noqa: BLE001 - reported by the test
            self.fatal = repr(error)
        finally:
            if consumer is not None:
                try:
                    consumer.close(autocommit=False)
                except Exception:  # noqa: BLE001
                    pass


def fetch_committed(bootstrap, deadline_s=30):
    """OffsetFetch for the whole group, retried while the restarted broker settles."""
    deadline = time.monotonic() + deadline_s
    last_error = None
    while time.monotonic() < deadline:
        try:
            consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP,
                                     enable_auto_commit=False, request_timeout_ms=5000)
            try:
                return {
                    (topic, partition): consumer.committed(TopicPartition(topic, partition),
                                                           timeout_ms=5000)
                    for topic in (MODERN_TOPIC, LEGACY_TOPIC)
                    for partition in range(PARTITION_COUNT)
                }
            finally:
                consumer.close(autocommit=False)
        except Exception as error:  # noqa: BLE001
            last_error = error
            time.sleep(0.2)
    raise AssertionError(f"OffsetFetch did not answer after a restart: {last_error!r}")


def end_offsets(bootstrap, topic):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tps = [TopicPartition(topic, partition) for partition in range(PARTITION_COUNT)]
        return {tp.partition: offset for tp, offset in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()


def read_back(bootstrap, topic):
    """Each partition from offset 0, with a modern and a legacy consumer; both must agree."""
    ends = end_offsets(bootstrap, topic)
    out = {}
    for partition in range(PARTITION_COUNT):
        modern = kp_consume(bootstrap, topic, ends[partition], partition=partition)
        legacy = kp_consume(bootstrap, topic, ends[partition], partition=partition,
                            api_version=LEGACY_API)
        assert len(modern) == ends[partition], (topic, partition, len(modern), ends[partition])
        assert legacy == modern, f"legacy and modern read-back differ on {topic}/{partition}"
        assert [offset for offset, _, _ in modern] == list(range(ends[partition]))
        out[partition] = modern
    return out


def check_modern(acked, records):
    problems = []
    for number, (partition, offset) in acked.items():
        log = records[partition]
        if offset >= len(log) or log[offset][1] != key_of("M", number):
            problems.append(f"acknowledged M-{number} missing at {partition}/{offset}")
    for partition, log in records.items():
        numbers = [number_of(key) for _, key, _ in log]
        for (_, key, value) in log:
            if value != value_of("M", number_of(key)):
                problems.append(f"M-{number_of(key)} has a wrong value")
        want = list(range(partition, partition + PARTITION_COUNT * len(numbers), PARTITION_COUNT))
        if numbers != want:
            first = next(i for i, (a, b) in enumerate(zip(numbers, want + [None] * len(numbers)))
                         if a != b)
            problems.append(
                f"modern partition {partition}: not exactly once in order from offset {first}: "
                f"{numbers[max(0, first - 3):first + 5]}")
    return problems


def check_legacy(producer, records):
    problems = []
    for number, (partition, offset) in producer.acked.items():
        log = records[partition]
        if offset >= len(log) or log[offset][1] != key_of("L", number):
            problems.append(f"acknowledged L-{number} missing at {partition}/{offset}")
    for partition, log in records.items():
        numbers = [number_of(key) for _, key, _ in log]
        collapsed = [n for i, n in enumerate(numbers) if i == 0 or numbers[i - 1] != n]
        sent = producer.sent_numbers(partition)
        # Every number sent was retried until acknowledged, so all are present, in send order.
        if collapsed != sent:
            first = next((i for i, (a, b) in enumerate(zip(collapsed, sent)) if a != b),
                         min(len(collapsed), len(sent)))
            problems.append(f"legacy partition {partition}: {len(collapsed)} distinct runs, "
                            f"{len(sent)} sent; first difference at run {first}: "
                            f"{collapsed[max(0, first - 3):first + 5]} vs "
                            f"{sent[max(0, first - 3):first + 5]}")
        for number, copies in collections.Counter(numbers).items():
            if copies > 1 and copies > producer.attempts.get(number, 0):
                problems.append(f"L-{number} present {copies} times but sent "
                                f"{producer.attempts.get(number, 0)} times")
            if copies > 1 and producer.attempts.get(number, 0) < 2:
                problems.append(f"L-{number} duplicated though its only send was acknowledged")
    return problems


def kill(broker):
    port = broker.port
    broker.stop(signal.SIGKILL)
    return port


def commit_count(group):
    with group.lock:
        return sum(map(len, group.commits.values()))


def wait_for(predicate, what, timeout_s=PROGRESS_TIMEOUT_S):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"no progress in {timeout_s} s: {what}")
        time.sleep(0.05)


def test_sigkill_cycles(broker_factory):
    seed = int(os.environ.get("SKIFF_CRASH_SEED", random.SystemRandom().randrange(2**31)))
    rng = random.Random(seed)
    headline = (f"crash test: seed {seed} (replay with SKIFF_CRASH_SEED={seed}), "
                f"{CRASH_CYCLES} cycles")
    print("\n" + headline)
    SUMMARY_LINES.append(headline)
    started = time.monotonic()
    broker = broker_factory(*BROKER_SETTINGS)
    create_topics(broker.bootstrap, [MODERN_TOPIC, LEGACY_TOPIC])
    modern = ModernProducer(broker.bootstrap)
    legacy = LegacyProducer(broker.bootstrap)
    group = GroupConsumer(broker.bootstrap)
    for worker in (modern, legacy, group):
        worker.start()
    regressions = []
    try:
        # Kills start once every client is working, so each cycle can catch all three mid-flight
        # (a loaded machine can take longer than one cycle for the first group join).
        wait_for(lambda: modern.acked and legacy.acked and commit_count(group),
                 "first acknowledgements and commit")
        for cycle in range(CRASH_CYCLES):
            time.sleep(rng.uniform(*RUN_BETWEEN_KILLS_S))
            port = kill(broker)
            # The process is dead: every commit acknowledged so far is in this snapshot or later.
            before = group.highest()
            broker.start(port=port)
            after = fetch_committed(broker.bootstrap)
            for tp, offset in before.items():
                if after.get(tp, -1) < offset:
                    regressions.append(
                        f"cycle {cycle}: {tp} committed {offset} acknowledged, OffsetFetch "
                        f"after restart says {after.get(tp)}")
            print(f"cycle {cycle + 1}/{CRASH_CYCLES}: modern acked {len(modern.acked)}, legacy "
                  f"acked {len(legacy.acked)}, group consumed {group.consumed}, "
                  f"committed {sum(before.values())}", flush=True)
        # Let the producers and the consumer make progress on the last broker, then stop them.
        commits_before, legacy_before = commit_count(group), len(legacy.acked)
        wait_for(lambda: commit_count(group) > commits_before
                 and len(legacy.acked) > legacy_before, "progress after the last restart")
    finally:
        for worker in (modern, legacy, group):
            worker.stop_event.set()
        for worker in (modern, legacy, group):
            worker.join(FINAL_DRAIN_S)
    assert not any(worker.is_alive() for worker in (modern, legacy, group)), "a client hung"
    assert modern.fatal is None and legacy.fatal is None and group.fatal is None, (
        modern.fatal, legacy.fatal, group.fatal)
    # One more kill after the last acknowledgement: nothing acknowledged may depend on the broker
    # having stayed up.
    port = kill(broker)
    broker.start(port=port)
    final = fetch_committed(broker.bootstrap)
    for tp, offset in group.highest().items():
        if final.get(tp, -1) < offset:
            regressions.append(f"final: {tp} committed {offset}, OffsetFetch says {final.get(tp)}")
    backwards = [
        f"{tp}: acknowledged commits went from {a} to {b}"
        for tp, offsets in group.commits.items()
        for a, b in zip(offsets, offsets[1:]) if b < a
    ]
    modern_records = read_back(broker.bootstrap, MODERN_TOPIC)
    legacy_records = read_back(broker.bootstrap, LEGACY_TOPIC)
    problems = check_modern(modern.acked, modern_records) + check_legacy(legacy, legacy_records)
    retried_present_twice = sum(
        1 for log in legacy_records.values()
        for i, (_, key, _) in enumerate(log) if i and log[i - 1][1] == key)
    summary = (f"crash test done: seed {seed}, {CRASH_CYCLES} cycles in "
               f"{time.monotonic() - started:.1f} s; modern {len(modern.acked)} acked "
               f"({len(modern.errors)} delivery errors), legacy {len(legacy.acked)} acked "
               f"({sum(1 for a in legacy.attempts.values() if a > 1)} retried, "
               f"{retried_present_twice} retried copies present); group consumed "
               f"{group.consumed}, {sum(map(len, group.commits.values()))} commits acknowledged "
               f"({group.commit_failures} failed)")
    print(summary)
    SUMMARY_LINES.append(summary)
    assert not modern.errors, f"idempotent producer gave up on messages: {modern.errors[:5]}"
    assert getattr(modern, "remaining", 1) == 0, "modern producer could not drain"
    assert len(modern.acked) == modern.produced
    assert len(modern.acked) > 0 and len(legacy.acked) > 0
    assert sum(map(len, group.commits.values())) > 0, (
        f"seed {seed}: the group consumer never committed; last error {group.last_error}")
    assert not regressions, regressions
    assert not backwards, backwards
    assert not problems, f"seed {seed}: " + "; ".join(problems[:20])


# --- disk full ----------------------------------------------------------------------------------

TMPFS_BYTES = "8m"
DISK_FULL_VALUE_BYTES = 64 * 1024
DISK_FULL_MESSAGES_MAX = 1000


def test_disk_full(tmp_path):
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(mount_point)],
                   check=True)
    broker = None
    try:
        broker = Broker(str(mount_point / "data"), BROKER_SETTINGS).start()
        create_topics(broker.bootstrap, ["full"])
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap, acks="all", retries=0, linger_ms=0,
            max_in_flight_requests_per_connection=1, request_timeout_ms=10000)
        acked = []
        error = None
        for number in range(DISK_FULL_MESSAGES_MAX):
            value = (f"full-{number}-".encode() * DISK_FULL_VALUE_BYTES)[:DISK_FULL_VALUE_BYTES]
            try:
                metadata = producer.send("full", key=key_of("F", number), value=value,
                                         partition=number % PARTITION_COUNT).get(timeout=15)
            except Exception as failure:  # noqa: BLE001 - the disk is full
                error = failure
                break
            acked.append((number, metadata.partition, metadata.offset))
        producer.close(timeout=2)
        line = f"disk-full test: full after {len(acked)} acknowledged messages: {error!r}"
        print("\n" + line)
        SUMMARY_LINES.append(line)
        assert error is not None, "8 MiB took every message: the disk never filled"
        # KAFKA_STORAGE_ERROR is error code 56; kafka-python raises its class for it.
        assert isinstance(error, KafkaStorageError) and error.errno == 56, (
            f"not a clear storage error: {error!r}")
        assert broker.alive(), (
            "broker died when the disk filled:\n" + "".join(broker.log_lines[-30:]))
        # The broker keeps serving reads of what it acknowledged while the disk is full.
        check_full_topic(broker.bootstrap, acked)
        broker.stop(signal.SIGKILL)
        # Restart on a larger disk with the same bytes: nothing acknowledged may be lost.
        larger = tmp_path / "larger"
        shutil.copytree(mount_point / "data", larger)
        broker = Broker(str(larger), BROKER_SETTINGS).start()
        check_full_topic(broker.bootstrap, acked)
        broker.stop()
        broker = None
    finally:
        if broker is not None and broker.alive():
            broker.stop(signal.SIGKILL)
        subprocess.run(["umount", str(mount_point)], check=False)


def check_full_topic(bootstrap, acked):
    for partition in range(PARTITION_COUNT):
        want = [(offset, number) for number, p, offset in acked if p == partition]
        seen = kp_consume(bootstrap, "full", len(want), partition=partition)
        got = [(offset, number_of(key)) for offset, key, _ in seen]
        assert got[:len(want)] == want, f"partition {partition}: acknowledged messages lost"
