"""Clients on a compacted topic (issue 37): a topic with cleanup.policy=compact gets four rounds of
values for 30 keys, a segment age apart, the last round tombstoning 5 of them; filler records
(each its own key) roll the segments so the cleaner can clean them. Then:

- the cleaner leaves exactly the latest record per key, each at the offset it was written at (a
  compacted log has gaps), tombstones included until delete.retention.ms has passed since the
  cleaning that first kept them, and no tombstoned key after that;
- every client reads exactly that, from offset 0 and from an offset inside a gap (it gets the next
  record): confluent-kafka, kafka-python (modern, and with api_version 0.10.1 and 0.9, which make it
  fetch with Fetch v3/v1 and read magic 1/0 messages), and the 0.9.0.1 Java consumer (Fetch v1,
  magic 0), the last three reading the log down-converted, each message at its own offset.

On Apache Kafka 4.1.1 (the check of this test, ecosystem.py) the legacy readers are skipped:
Kafka 4 removed Fetch v0-v3; the run on Kafka 3.9.1 checks them."""

import time

import pytest
from confluent_kafka import Producer

from conftest import SUMMARY_LINES
from ecosystem import (FAST_CLEANING, FAST_SEGMENT_MS, TARGET_NAME, TARGET_SERVES_LEGACY_FETCH, SingleNode,
                       create_topic, read_partition, wait_for)
from java_programs import legacy_classpath, run_java

TOPIC = "compacted"
KEYS = [f"key-{index:02d}".encode() for index in range(30)]
# Every fifth key, so the last round's batch keeps records on both sides of each tombstone.
TOMBSTONED = set(KEYS[3::5])
ROUNDS = 4
DELETE_RETENTION_MS = 5000
CLEANED_WITHIN_S = 60
TOMBSTONES_GONE_WITHIN_S = DELETE_RETENTION_MS / 1000 + 60
NUDGE_INTERVAL_S = FAST_SEGMENT_MS / 1000 + 0.2
LEGACY_JAVA_VERSION = "0.9.0.1"


class Writer:
    def __init__(self, bootstrap):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self.written = []  # [(offset, key, value)]
        self.fillers = 0

    def write(self, records):
        acked = []
        for key, value in records:
            self.producer.produce(TOPIC, key=key, value=value, partition=0,
                                  on_delivery=lambda error, message: acked.append((error, message)))
        self.producer.flush(30)
        errors = [error for error, _ in acked if error is not None]
        assert not errors and len(acked) == len(records), f"writes not acknowledged: {errors[:3]}"
        self.written += sorted((m.offset(), m.key(), m.value()) for _, m in acked)

    def nudge(self):
        """One filler record under a key of its own: it rolls the aged active segment."""
        self.write([(f"filler-{self.fillers:03d}".encode(), b"filler")])
        self.fillers += 1


def latest_per_key(written, keep_tombstones):
    latest = {}
    for offset, key, value in written:
        latest[key] = (offset, key, value)
    return sorted(record for record in latest.values() if keep_tombstones or record[2] is not None)


def duplicated(records):
    keys = [key for _offset, key, _value in records]
    return len(keys) != len(set(keys))


class Scenario:
    """The topic written and cleaned once for this file; what was seen on the way."""

    def __init__(self, target):
        self.target = target
        self.writer = Writer(target.bootstrap)
        create_topic(target.bootstrap, TOPIC, config=dict(FAST_CLEANING, **{
            "delete.retention.ms": str(DELETE_RETENTION_MS)}))
        for round_number in range(1, ROUNDS + 1):
            last = round_number == ROUNDS
            self.writer.write([(key, None if last and key in TOMBSTONED else f"{key.decode()} v{round_number}".encode())
                               for key in KEYS])
            time.sleep(NUDGE_INTERVAL_S)
        self.tombstones_written = time.monotonic()
        self.first_cleaned = self._wait_first_cleaning()
        self.first_cleaned_early = time.monotonic() < self.tombstones_written + DELETE_RETENTION_MS / 1000
        self.final = self._wait_tombstones_gone()
        self.expected = latest_per_key(self.writer.written, keep_tombstones=False)
        self.last_offset = self.expected[-1][0]
        SUMMARY_LINES.append(f"compacted topic on {TARGET_NAME}: {len(self.writer.written)} records written, "
                             f"{len(self.expected)} kept; first cleaning seen before delete.retention.ms: "
                             f"{self.first_cleaned_early}")

    def _read_after_nudge(self):
        self.writer.nudge()
        return read_partition(self.target.bootstrap, TOPIC)

    def _wait_first_cleaning(self):
        return wait_for(lambda: (lambda records: None if duplicated(records) else records)(self._read_after_nudge()),
                        CLEANED_WITHIN_S, "every key left once by the cleaner", interval_s=NUDGE_INTERVAL_S)

    def _wait_tombstones_gone(self):
        def gone():
            records = self._read_after_nudge()
            return records if not any(key in TOMBSTONED for _offset, key, _value in records) else None
        return wait_for(gone, TOMBSTONES_GONE_WITHIN_S, "tombstoned keys removed after delete.retention.ms",
                        interval_s=NUDGE_INTERVAL_S)

    def gap_starts(self):
        """(offset inside a gap, the next offset kept): one in the whole batches the cleaner
        removed, one where a tombstone was in the middle of the last round's batch."""
        kept = {offset for offset, _key, _value in self.expected}
        whole_batch_gap = len(KEYS) + 5  # round 2: every record of it superseded
        tombstone_gap = next(offset for offset, key, _value in self.writer.written if key == sorted(TOMBSTONED)[0])
        starts = []
        for gap in (whole_batch_gap, tombstone_gap):
            assert gap not in kept
            starts.append((gap, min(offset for offset in kept if offset > gap)))
        return starts


@pytest.fixture(scope="module")
def scenario():
    target = SingleNode()
    try:
        yield Scenario(target)
    except Exception:
        print(target.log_tail(80))
        raise
    finally:
        target.stop()


def test_the_cleaner_keeps_the_latest_record_per_key_at_its_offset(scenario):
    written_at = {offset: (key, value) for offset, key, value in scenario.writer.written}
    for offset, key, value in scenario.first_cleaned:
        assert written_at[offset] == (key, value), f"offset {offset} holds another record than was written"
    # At the first cleaning the fillers written so far are part of the truth too.
    upto = scenario.first_cleaned[-1][0]
    truth = latest_per_key([r for r in scenario.writer.written if r[0] <= upto], keep_tombstones=True)
    live = [record for record in truth if record[2] is not None]
    seen_live = [record for record in scenario.first_cleaned if record[2] is not None]
    assert seen_live == live


def test_tombstones_stay_for_delete_retention_then_go(scenario):
    if scenario.first_cleaned_early:
        # Read before delete.retention.ms had passed since the tombstones were written, so before
        # any cleaning's delete horizon: every tombstone must still be there.
        tombstones = sorted(key for _offset, key, value in scenario.first_cleaned if value is None)
        assert tombstones == sorted(TOMBSTONED), "a tombstone was removed before delete.retention.ms"
    assert scenario.final == [r for r in scenario.expected if r[0] <= scenario.final[-1][0]]


def kafka_python_read(bootstrap, start, last, api_version=None):
    from kafka import KafkaConsumer, TopicPartition

    kwargs = {"bootstrap_servers": bootstrap, "enable_auto_commit": False, "group_id": None}
    if api_version is not None:
        kwargs["api_version"] = api_version
    consumer = KafkaConsumer(**kwargs)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, start)
    seen = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and not (seen and seen[-1][0] >= last):
            for records in consumer.poll(timeout_ms=500).values():
                seen.extend((record.offset, record.key, record.value) for record in records)
    finally:
        consumer.close()
    return seen


def confluent_read(bootstrap, start, last):
    return [record for record in read_partition(bootstrap, TOPIC, start=start) if record[0] <= last]


def java_legacy_reads(bootstrap, starts, last, classes):
    """{start: records} read by the legacy Java consumer, every start in one JVM."""
    code, stdout, stderr = run_java(classes, legacy_classpath(LEGACY_JAVA_VERSION), "skiff.legacy.CompactedReader",
                                    bootstrap, TOPIC, 0, last, *starts)
    assert code == 0, f"kafka-clients {LEGACY_JAVA_VERSION} did not reach offset {last}:\n{stdout}\n{stderr[-4000:]}"
    reads = {}
    for line in stdout.splitlines():
        if line.startswith("FROM\t"):
            seen = reads.setdefault(int(line.split("\t")[1]), [])
        elif line.startswith("REC\t"):
            _, offset, key, value = line.split("\t", 3)
            seen.append((int(offset), None if key == "<null>" else key.encode(),
                         None if value == "<null>" else value.encode()))
    return reads


def each_start(read):
    return lambda bootstrap, starts, last, _classes: {start: read(bootstrap, start, last) for start in starts}


READERS = {
    "confluent-kafka": each_start(confluent_read),
    "kafka-python": each_start(kafka_python_read),
    "kafka-python-0.10.1": each_start(lambda bootstrap, start, last: kafka_python_read(bootstrap, start, last, (0, 10, 1))),
    "kafka-python-0.9": each_start(lambda bootstrap, start, last: kafka_python_read(bootstrap, start, last, (0, 9))),
    f"java-{LEGACY_JAVA_VERSION}": java_legacy_reads,
}
LEGACY_READERS = {"kafka-python-0.10.1", "kafka-python-0.9", f"java-{LEGACY_JAVA_VERSION}"}


@pytest.mark.parametrize("reader", list(READERS))
def test_each_client_reads_the_latest_value_per_key(scenario, legacy_classes, reader):
    if reader in LEGACY_READERS and not TARGET_SERVES_LEGACY_FETCH:
        pytest.skip(f"{TARGET_NAME} has no Fetch v0-v3 (a run on Kafka 3.9.1 checks these readers)")
    classes = legacy_classes(LEGACY_JAVA_VERSION) if reader.startswith("java-") else None
    gaps = scenario.gap_starts()
    reads = READERS[reader](scenario.target.bootstrap, [0] + [gap for gap, _ in gaps], scenario.last_offset, classes)
    assert reads[0] == scenario.expected
    for gap, next_kept in gaps:
        seen = reads[gap]
        assert seen and seen[0][0] == next_kept, f"from offset {gap} (a gap) the first record must be {next_kept}"
        assert seen == [record for record in scenario.expected if record[0] >= gap]
