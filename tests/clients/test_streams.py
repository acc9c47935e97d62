"""A stateful Kafka Streams application (issue 37): kafka-streams 4.1.1, a count per key into a
RocksDB store whose changelog topic Streams creates compacted, at_least_once
(tests/clients/java/ecosystem/src/skiff/eco/CountApp.java, started as its users start it, one JVM
per run; its store read through an interactive query).

The changelog gets topic configs that let the cleaner clean it within seconds, and is cleaned
while the app counts (fewer records than count updates, the latest per key equal to the count).
The app is stopped with SIGTERM (a graceful close), more records come, and it is restarted with an
empty state directory: it restores its store from the compacted changelog and its counts are
exact. Then it is killed with SIGKILL, more records come, and it is restarted empty again: no count
is below the truth (at_least_once may count a record twice, never lose one)."""

import collections
import random
import shutil
import signal
import struct
import tempfile
import time
import pathlib

import pytest
from confluent_kafka import Producer

from conftest import SUMMARY_LINES
from ecosystem import (TARGET_NAME, FAST_CLEANING, FAST_SEGMENT_MS, JavaProcess, SingleNode, assert_compacted_config,
                       compile_ecosystem, create_topic, ecosystem_classpath, log4j2_config, read_partition,
                       wait_for)

INPUT = "words"
PARTITIONS = 2
KEYS = [f"word-{index}" for index in range(12)]
APP_ID = "skiff-counts"
CHANGELOG = f"{APP_ID}-counts-changelog"
CHANGELOG_CONFIGS = {key: value for key, value in FAST_CLEANING.items() if key != "cleanup.policy"}
RECORDS_PER_WAVE = 400
APP_START_S = 90
COUNTED_WITHIN_S = 60
CHANGELOG_CLEANED_WITHIN_S = 60
NUDGE_INTERVAL_S = FAST_SEGMENT_MS / 1000 + 0.2
JVM = ["-Xmx256m"]


class Input:
    """Writes records to the input topic and keeps the true count per key."""

    def __init__(self, bootstrap, seed=37):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self.random = random.Random(seed)
        self.truth = collections.Counter()
        self.updates = 0

    def write(self, count):
        keys = [self.random.choice(KEYS) for _ in range(count)]
        errors = []
        for key in keys:
            self.producer.produce(INPUT, key=key.encode(), value=b"x",
                                  on_delivery=lambda error, _m: error is not None and errors.append(error))
        assert self.producer.flush(30) == 0 and not errors, errors[:3]
        self.truth.update(keys)
        self.updates += count


class App:
    """One run of CountApp with its own (new, empty) state directory."""

    def __init__(self, classes, bootstrap, workdir, run):
        state = workdir / f"state-{run}"
        state.mkdir()
        configs = ",".join(f"{key}={value}" for key, value in CHANGELOG_CONFIGS.items())
        self.process = JavaProcess("skiff.eco.CountApp", [bootstrap, APP_ID, INPUT, state, configs],
                                   f"{classes}:{ecosystem_classpath()}", workdir / f"app-{run}.log",
                                   jvm_options=[*JVM, f"-Dlog4j2.configurationFile={log4j2_config(workdir, 'WARN')}"])
        wait_for(lambda: self._alive() and "STATE RUNNING" in self.process.lines, APP_START_S, "the app RUNNING",
                 interval_s=0.5)

    def _alive(self):
        assert self.process.alive(), f"the app exited:\n{self.process.tail()}"
        return True

    def counts(self):
        """The store's counts by an interactive query; None while it is not queryable."""
        before = len(self.process.lines)
        self.process.send("dump")
        line = wait_for(lambda: self._alive() and next((l for l in self.process.lines_since(before)
                                                         if l.startswith("STORE")), None), 10, "a store dump")
        if not line.startswith("STORE "):
            return None if line.startswith("STORE-UNAVAILABLE") else {}
        return {key: int(value) for key, value in (pair.split("=") for pair in line.split()[1:])}

    def wait_counted(self, truth, what):
        """Until every key's count reached the truth (all input processed); returns the counts."""
        return wait_for(lambda: (lambda counts: counts if counts is not None and all(
            counts.get(key, 0) >= truth[key] for key in truth) else None)(self.counts()),
            COUNTED_WITHIN_S, what, interval_s=0.5)

    def restored(self):
        """{changelog partition: records restored} from the app's restore listener."""
        return {line.split()[1]: int(line.split()[2]) for line in self.process.lines if line.startswith("RESTORED ")}

    def stop(self, sig):
        return self.process.stop(sig)




def changelog_latest(bootstrap):
    """The changelog's records and its latest count per key (a timestamped store's value: an
    8-byte timestamp, then the 8-byte count)."""
    records, latest = 0, {}
    for partition in range(PARTITIONS):
        for _offset, key, value in read_partition(bootstrap, CHANGELOG, partition=partition):
            records += 1
            latest[key.decode()] = None if value is None else struct.unpack(">q", value[-8:])[0]
    return records, latest


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    return compile_ecosystem(tmp_path_factory.mktemp("eco-classes"))


@pytest.fixture
def workdir():
    path = pathlib.Path(tempfile.mkdtemp(prefix="skiff-streams-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def wait_changelog_cleaned(bootstrap, app, source):
    """Until the cleaner removed superseded counts from the changelog while the latest per key
    stayed; each input record written meanwhile makes a changelog append that rolls its aged
    segment."""
    def cleaned():
        source.write(1)
        app.wait_counted(source.truth, "the nudge counted")
        records, latest = changelog_latest(bootstrap)
        return records < source.updates and latest == dict(source.truth) and records
    return wait_for(cleaned, CHANGELOG_CLEANED_WITHIN_S, "the changelog cleaned, its latest counts intact",
                    interval_s=NUDGE_INTERVAL_S)


def test_counts_survive_a_graceful_restart_and_a_kill(classes, workdir):
    target = SingleNode()
    apps = []
    try:
        create_topic(target.bootstrap, INPUT, partitions=PARTITIONS)
        source = Input(target.bootstrap)
        source.write(RECORDS_PER_WAVE)
        apps.append(App(classes, target.bootstrap, workdir, 1))
        app = apps[-1]
        assert app.wait_counted(source.truth, "the first wave counted") == dict(source.truth)
        assert_compacted_config(target.bootstrap, CHANGELOG)
        time.sleep(NUDGE_INTERVAL_S)
        source.write(RECORDS_PER_WAVE)
        app.wait_counted(source.truth, "the second wave counted")
        kept, updates_then = wait_changelog_cleaned(target.bootstrap, app, source), source.updates
        assert app.counts() == dict(source.truth)

        code = app.stop(signal.SIGTERM)
        assert code in (0, 143) and "CLOSED" in app.process.lines, f"exit {code}:\n{app.process.tail()}"
        source.write(RECORDS_PER_WAVE)
        apps.append(App(classes, target.bootstrap, workdir, 2))
        app = apps[-1]
        app.wait_counted(source.truth, "counted after the graceful restart")
        restored = app.restored()
        assert len(restored) == PARTITIONS and 0 < sum(restored.values()), restored
        time.sleep(1)  # anything counted twice would show now
        assert app.counts() == dict(source.truth), "after a graceful close and a restore the counts are exact"

        app.stop(signal.SIGKILL)
        source.write(RECORDS_PER_WAVE)
        apps.append(App(classes, target.bootstrap, workdir, 3))
        app = apps[-1]
        counts = app.wait_counted(source.truth, "counted after the kill")
        below = {key: (counts.get(key, 0), truth) for key, truth in source.truth.items() if counts.get(key, 0) < truth}
        assert not below, f"counts below the truth after a kill: {below}"
        assert sum(app.restored().values()) > 0
        SUMMARY_LINES.append(f"streams on {TARGET_NAME}: changelog cleaned to {kept} records of "
                             f"{updates_then} updates; restored after SIGTERM {restored}, "
                             f"after SIGKILL {app.restored()}")
    except Exception:
        print(target.log_tail(80))
        raise
    finally:
        for app in apps:
            app.stop(signal.SIGTERM)
        target.stop()
