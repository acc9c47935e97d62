"""Kafka Streams `exactly_once_v2` on 3 brokers (issue 38): the word count of Streams' examples
(tests/clients/java/ecosystem/src/skiff/eco/WordCountEos.java, kafka-streams 4.1.1, one JVM)
counts the words of 10,000 input lines; half-way through, while the second half is being written
and counted, the leader of its output partition is killed with SIGKILL. Read with read_committed,
the output's counts per word only ever rise and end exactly at the truth: no update lost, none
counted twice, none of an aborted transaction seen.

With SKIFF_ECO_KAFKA_LIBS set to Apache Kafka 4.1.1's jars it runs against a 3-node Kafka quorum
(ecosystem.py), the check of the test itself."""

import collections
import random
import shutil
import signal
import struct
import tempfile
import pathlib
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from conftest import SUMMARY_LINES
from ecosystem import (TARGET_NAME, JavaProcess, admin, compile_ecosystem, create_topic, ecosystem_classpath,
                       log4j2_config, three_brokers, wait_for)

INPUT = "eos-lines"
OUTPUT = "eos-counts"
APP_ID = "skiff-eos-wordcount"
LINES = 10_000
WORDS = [f"w{index}" for index in range(30)]
WORDS_PER_LINE = (1, 6)
REPLICAS = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}
APP_START_S = 90
# The leader's death (a session timeout, a new leader, the coordinators' failover) and the
# restarted transactions fit well inside this.
COUNTED_WITHIN_S = 150
NEW_LEADER_WITHIN_S = 30
CHUNK_LINES = 250
KILL_AFTER_LINES = 1000
WRITE_WITHIN_S = 120
JVM = ["-Xmx384m"]


def lines(seed=38):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(*WORDS_PER_LINE))) for _ in range(LINES)]


def write(bootstrap, batch):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True})
    errors = []
    for index, line in batch:
        producer.produce(INPUT, key=str(index).encode(), value=line.encode(),
                         on_delivery=lambda error, _m: error is not None and errors.append(error))
        producer.poll(0)
    assert producer.flush(60) == 0 and not errors, errors[:3]


class Writer(threading.Thread):
    """Writes `batch` in chunks of CHUNK_LINES on a thread of its own; `written` counts the lines
    acknowledged so far."""

    def __init__(self, bootstrap, batch):
        super().__init__(daemon=True)
        self.bootstrap, self.batch, self.written, self.failure = bootstrap, batch, 0, None
        self.start()

    def run(self):
        try:
            for first in range(0, len(self.batch), CHUNK_LINES):
                write(self.bootstrap, self.batch[first:first + CHUNK_LINES])
                self.written = first + CHUNK_LINES
        except Exception as error:  # noqa: BLE001 - reported by join()
            self.failure = error

    def join(self, timeout=None):
        super().join(WRITE_WITHIN_S if timeout is None else timeout)
        assert not self.is_alive(), f"the second half not written within {WRITE_WITHIN_S} s ({self.written} lines)"
        assert self.failure is None, f"writing the second half: {self.failure!r}"


def output_leader(bootstrap):
    return admin(bootstrap).list_topics(OUTPUT, timeout=10).topics[OUTPUT].partitions[0].leader


def committed_updates(bootstrap):
    """Every count update of the output read with read_committed to its last stable offset:
    {word: [counts in order]}."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "skiff-eos-reader",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    updates = collections.defaultdict(list)
    try:
        consumer.assign([TopicPartition(OUTPUT, 0, 0)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return updates
                raise AssertionError(f"reading {OUTPUT}: {message.error()}")
            updates[message.key().decode()].append(struct.unpack(">q", message.value())[0])
        raise AssertionError(f"reading {OUTPUT} took over 60 s")
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    return compile_ecosystem(tmp_path_factory.mktemp("eco-classes"))


def test_exactly_once_word_count_survives_the_output_leader_killed(classes, etcd):
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="skiff-eos-"))
    cluster = three_brokers(etcd)
    app = None
    try:
        bootstrap = cluster.bootstrap
        create_topic(bootstrap, INPUT, partitions=2, replicas=REPLICAS, config=TOPIC_CONFIG)
        create_topic(bootstrap, OUTPUT, partitions=1, replicas=REPLICAS, config=TOPIC_CONFIG)
        text = list(enumerate(lines()))
        truth = collections.Counter(word for _i, line in text for word in line.split())
        state = workdir / "state"
        state.mkdir()
        app = JavaProcess("skiff.eco.WordCountEos", [bootstrap, APP_ID, INPUT, OUTPUT, state, REPLICAS],
                          f"{classes}:{ecosystem_classpath()}", workdir / "app.log",
                          jvm_options=[*JVM, f"-Dlog4j2.configurationFile={log4j2_config(workdir, 'WARN')}"])
        wait_for(lambda: app.alive() and "STATE RUNNING" in app.lines, APP_START_S, "the app RUNNING", 0.5)

        started = time.monotonic()
        write(bootstrap, text[:LINES // 2])
        wait_for(lambda: sum(map(len, committed_updates(bootstrap).values())) > 0, 60, "committed counts", 0.5)
        # The second half goes in chunks while the app counts; the leader dies a few chunks in.
        writer = Writer(bootstrap, text[LINES // 2:])
        wait_for(lambda: writer.written >= KILL_AFTER_LINES or writer.failure, 60, "the second half under way", 0.1)
        leader = output_leader(bootstrap)
        assert leader >= 0, "the output partition has no leader"
        cluster.brokers[leader].stop(signal.SIGKILL)
        survivors = ",".join(b.bootstrap for i, b in enumerate(cluster.brokers) if i != leader)
        wait_for(lambda: output_leader(survivors) not in (-1, leader), NEW_LEADER_WITHIN_S, "a new output leader")
        writer.join()

        def exact():
            assert app.alive(), f"the app exited:\n{app.tail()}"
            updates = committed_updates(survivors)
            return updates if {word: counts[-1] for word, counts in updates.items()} == dict(truth) else None

        updates = wait_for(exact, COUNTED_WITHIN_S, "the exact counts, read_committed", interval_s=1)
        took = time.monotonic() - started
        time.sleep(2)  # an update counted twice would show now
        updates = committed_updates(survivors)
        assert {word: counts[-1] for word, counts in updates.items()} == dict(truth)
        for word, counts in updates.items():
            assert counts == sorted(counts) and counts[-1] == truth[word], f"{word}: {counts[-20:]} (truth {truth[word]})"
        SUMMARY_LINES.append(f"streams exactly_once_v2 on {TARGET_NAME}: {LINES} lines, {sum(truth.values())} words "
                             f"counted exactly in {took:.0f} s with broker {leader} (output leader) killed")
    except Exception:
        if app is not None:
            print(app.tail(80))
        raise
    finally:
        if app is not None:
            app.stop(signal.SIGTERM)
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
