#!/usr/bin/env python3
"""The log cleaner against Apache Kafka 4.1.1 (issue 37, "Performance"), in one run.

Starts Skiff's release broker and Apache Kafka 4.1.1 (single-node KRaft, the jars
bench/scripts/peers.sh fetches with mvn) one after the other on 127.0.0.1 with free ports, runs the
same phases against each, and writes bench/reports/compaction.md with its SVG plots and the raw
data under bench/reports/data/compaction/ (render again from it with --render).

Phases per broker (each a fresh broker on a fresh data directory, the same settings on both):
  clean        1 partition, cleanup.policy=compact, segment.bytes as --segment-bytes, filled with
               --keys distinct keys x --versions versions of --value-bytes values (every key once
               per version, versions in order) while min.cleanable.dirty.ratio=1.0 (both brokers
               clean only strictly above it), then lowered to 0.5 with IncrementalAlterConfigs.
               MB/s is the brokers' own cleaner log lines ("X MB of log processed in S seconds",
               summed over the passes); CPU is the broker process's user+system time from
               /proc/<pid>/stat over the cleanings' windows (each line's time minus its seconds).
               RSS is sampled over the same windows (the key-map bound, 128 MiB buffer).
  dedupe-16    the same with log.cleaner.dedupe.buffer.size=16 MiB and --small-versions versions
               (the keys no longer fit one pass): RSS against the buffer plus the baseline.
  throttled    log.cleaner.io.max.bytes.per.second=50 MiB/s: skiff-bench throughput (produce and
               Fetch v4, 12 partitions x 1 kB) on another topic before, during and after the
               cleaning of a filled compacted log; a run counts as "during" only if the cleaning
               neither started after it began nor ended before it finished.
  unthrottled  the same with no throttle.
  partitions   --many-partitions compacted partitions (segment.ms rolls them), cleaned one after
               the other: RSS and open files sampled while the cleaner runs.

Usage: bench/scripts/compaction.py [--keys 1000000 --versions 10 ...]   (see --help)
       bench/scripts/compaction.py --render   (the report again from bench/reports/data/compaction)
Needs: the release skiff and skiff-bench (built unless --skip-build), java 17, mvn with Kafka's
jars reachable, python3 with confluent-kafka.
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
import base64

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic, ResourceType)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "scripts", "peers"))
import report as peers_report  # noqa: E402  (svg_bars, shared with peers.sh's report)

# The broker under test: the worktree's release build unless SKIFF_BIN names another (as the client
# tests take it).
SKIFF_BIN = os.environ.get("SKIFF_BIN", os.path.join(ROOT, "target/release/skiff"))
MIB = 1 << 20
GIB = 1 << 30
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
KAFKA_VERSION = "4.1.1"
# Kafka's own scripts run the broker with these (kafka-server-start.sh, kafka-run-class.sh).
KAFKA_JVM = ["-Xmx1g", "-Xms1g", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
             "-Djava.awt.headless=true"]
# Both brokers' cleaner threads, by /proc/<pid>/task/<tid>/comm (Java cuts names at 15 bytes).
CLEANER_THREAD_PREFIXES = ("log-cleaner-", "kafka-log-clean")
SAMPLE_SECONDS = 0.2
# Kafka's cleaner backoff is 15 s by default; both brokers get 1 s so a lowered ratio is seen soon.
BACKOFF_MS = 1000
THROTTLE_BYTES_PER_SECOND = 50 * MIB
# The report: bench/reports/<REPORT_NAME>.md and its plots.
REPORT_NAME = "compaction"
SMALL_DEDUPE_BYTES = 16 * MIB
# min.cleanable.dirty.ratio once the log is filled (Kafka's default).
LOWERED_RATIO = 0.5
# docs/benchmarks.md, partitions at scale: the open files' cap (skiff.log.files.max's default).
LOG_FILES_MAX = 4096
DEFAULT_DEDUPE_BYTES = 128 * MIB
ANSI = re.compile(r"\x1b\[[0-9;]*m")
STAMP = re.compile(r"^\[?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z?")
CLEANED = re.compile(r"Log cleaner thread (\d+) cleaned log (\S+) \(dirty section = \[(\d+), (\d+)\]\)")
PROCESSED = re.compile(r"([\d,.]+) MB of log processed in ([\d,.]+) seconds")
INDEXED_KAFKA = re.compile(r"Indexed ([\d,.]+) MB in ([\d,.]+) seconds")
THROUGHPUT = re.compile(r"produce (\d+) MB/s; v4 PLAINTEXT (\d+) MB/s")


def log(message):
    print(f"[compaction {time.strftime('%H:%M:%S', time.gmtime())}] {message}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, process, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return True
        except OSError:
            time.sleep(0.5)
    return False


# --- brokers ------------------------------------------------------------------------------------

def kafka_libs(work):
    return os.path.join(work, f"kafka-{KAFKA_VERSION}", "libs")


def install_kafka(work):
    libs = kafka_libs(work)
    if os.path.exists(os.path.join(libs, f"kafka_2.13-{KAFKA_VERSION}.jar")):
        return libs
    log(f"installing Kafka {KAFKA_VERSION} with mvn")
    os.makedirs(libs, exist_ok=True)
    subprocess.run(["mvn", "-q", "-B", "-f", os.path.join(ROOT, "bench/scripts/peers/pom.xml"),
                    f"-Dkafka.version={KAFKA_VERSION}", "-Dkafka.log4j2",
                    "dependency:copy-dependencies", f"-DoutputDirectory={libs}"], check=True)
    return libs


class Broker:
    """One broker process on a fresh state directory: its port, pid and log file."""

    def __init__(self, kind, state, settings, work):
        self.kind, self.state, self.settings, self.work = kind, state, settings, work
        self.port = free_port()
        self.log_path = os.path.join(state, "broker.log")
        self.data = os.path.join(state, "data")
        shutil.rmtree(state, ignore_errors=True)
        os.makedirs(state)
        out = open(self.log_path, "wb")
        if kind == "skiff":
            command = [SKIFF_BIN, "serve",
                       "--set", f"log.dirs={self.data}",
                       "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.port}"]
            for key, value in settings.items():
                command += ["--set", f"{key}={value}"]
            env = dict(os.environ, SKIFF_LOG="warn,skiff_broker::ops::cleaner=info", NO_COLOR="1")
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        else:
            self.process = self._start_kafka(out)
        self.pid = self.process.pid
        if not wait_for_port(self.port, self.process, 180):
            self.stop()
            raise RuntimeError(f"{kind} did not listen; see {self.log_path}")
        # Kafka listens before its controller has elected itself.
        time.sleep(3 if kind == "kafka" else 0.5)

    def _start_kafka(self, out):
        libs = kafka_libs(self.work)
        controller = free_port()
        properties = {
            "process.roles": "broker,controller", "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": self.data, "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1", "group.initial.rebalance.delay.ms": "0",
        }
        properties.update({k: str(v) for k, v in self.settings.items()})
        server = os.path.join(self.state, "server.properties")
        with open(server, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in properties.items())
        # Warnings to the broker log, and the cleaner's INFO lines (its log-cleaner.log in
        # Kafka's distribution), with a UTC timestamp to place each cleaning in time.
        log4j = os.path.join(self.state, "log4j2.properties")
        with open(log4j, "w") as f:
            f.write("\n".join([
                "appender.out.type=Console", "appender.out.name=out",
                "appender.out.layout.type=PatternLayout",
                "appender.out.layout.pattern=[%d{yyyy-MM-dd'T'HH:mm:ss.SSS}{UTC}Z] %p %m (%c)%n",
                "rootLogger.level=WARN", "rootLogger.appenderRef.out.ref=out",
                # The cleaner thread logs under its own class (LogCleaner$CleanerThread).
                "logger.cleaner.name=org.apache.kafka.storage.internals.log",
                "logger.cleaner.level=INFO", ""]))
        cluster = "A" + base64.urlsafe_b64encode(uuid.uuid4().bytes).decode()[1:22]
        classpath = os.path.join(libs, "*")
        subprocess.run(["java", *KAFKA_JVM, "-cp", classpath, "kafka.tools.StorageTool", "format",
                        "-t", cluster, "-c", server], check=True, capture_output=True)
        return subprocess.Popen(["java", *KAFKA_JVM, f"-Dlog4j2.configurationFile={log4j}",
                                 "-cp", classpath, "kafka.Kafka", server],
                                stdout=out, stderr=subprocess.STDOUT)

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# --- /proc ----------------------------------------------------------------------------------------

def process_figures(pid):
    """CPU seconds (user+system), RSS bytes and open files of a process, and its cleaner threads'
    CPU seconds and bytes read and written (rchar, wchar)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    with open(f"/proc/{pid}/statm") as f:
        rss = int(f.read().split()[1]) * PAGE_BYTES
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    cleaner_cpu, cleaner_read, cleaner_written = 0.0, 0, 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if not f.read().startswith(CLEANER_THREAD_PREFIXES):
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                tfields = f.read().rsplit(")", 1)[1].split()
            cleaner_cpu += (int(tfields[11]) + int(tfields[12])) / CLOCK_TICKS
            with open(f"/proc/{pid}/task/{tid}/io") as f:
                io = dict(line.split(": ") for line in f.read().splitlines())
            cleaner_read += int(io["rchar"])
            cleaner_written += int(io["wchar"])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return {"t": time.time(), "cpu": cpu, "rss": rss, "fds": fds, "cleaner_cpu": cleaner_cpu,
            "cleaner_read": cleaner_read, "cleaner_written": cleaner_written}


class Sampler:
    """Samples a process's /proc figures every SAMPLE_SECONDS on a thread of its own."""

    def __init__(self, pid):
        self.pid, self.samples, self._stop = pid, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                self.samples.append(process_figures(self.pid))
            except (FileNotFoundError, ProcessLookupError):
                return
            self._stop.wait(SAMPLE_SECONDS)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.samples


def at(samples, t, key):
    """A sampled figure at time t, linearly interpolated."""
    before = [s for s in samples if s["t"] <= t]
    after = [s for s in samples if s["t"] >= t]
    if not before:
        return after[0][key]
    if not after:
        return before[-1][key]
    a, b = before[-1], after[0]
    if b["t"] == a["t"]:
        return a[key]
    return a[key] + (b[key] - a[key]) * (t - a["t"]) / (b["t"] - a["t"])


# --- the cleaner's log lines and files --------------------------------------------------------------

def parse_stamp(text):
    return time.mktime(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone + (
        float("0" + text[19:]) if len(text) > 19 else 0.0)


def cleanings(log_path, topic):
    """Every cleaning of `topic`'s partition 0 logged so far: end time, MB, seconds (and, from
    Kafka's lines, the seconds of its map phase)."""
    found, stamp, current = [], None, None
    with open(log_path, errors="replace") as f:
        for raw in f:
            line = ANSI.sub("", raw)
            match = STAMP.match(line)
            if match:
                stamp = parse_stamp(match.group(1))
            match = CLEANED.search(line)
            if match:
                current = {"log": match.group(2), "dirty": [int(match.group(3)), int(match.group(4))],
                           "end": stamp} if match.group(2) == f"{topic}-0" else None
                continue
            if current is None:
                continue
            match = PROCESSED.search(line)
            if match:
                current["mb"] = float(match.group(1).replace(",", ""))
                current["seconds"] = float(match.group(2).replace(",", ""))
                found.append(current)
            match = INDEXED_KAFKA.search(line)
            if match and found and found[-1] is current:
                current["map_seconds"] = float(match.group(2).replace(",", ""))
    return found


def all_cleanings(log_path):
    """How many cleanings of any log were logged."""
    with open(log_path, errors="replace") as f:
        return sum(1 for line in f if CLEANED.search(ANSI.sub("", line)))


def dirty_ratio(data, topic):
    """Kafka's dirty ratio of `topic`-0 from its files: bytes of the sealed segments at or past
    the first dirty offset (cleaner-offset-checkpoint, else the log start) over all sealed bytes."""
    directory = os.path.join(data, f"{topic}-0")
    segments = sorted((int(name[:-4]), os.path.getsize(os.path.join(directory, name)))
                      for name in os.listdir(directory) if name.endswith(".log"))
    first_dirty = segments[0][0]
    checkpoint = os.path.join(data, "cleaner-offset-checkpoint")
    if os.path.exists(checkpoint):
        with open(checkpoint) as f:
            for line in f.read().splitlines()[2:]:
                parts = line.split()
                if len(parts) == 3 and parts[0] == topic and parts[1] == "0":
                    first_dirty = int(parts[2])
    sealed = segments[:-1]
    clean = sum(size for (base, size), (next_base, _) in zip(sealed, segments[1:])
                if next_base <= first_dirty)
    total = sum(size for _, size in sealed)
    return {"ratio": (total - clean) / total if total else 0.0, "sealed_bytes": total,
            "segments": len(segments), "log_bytes": sum(size for _, size in segments)}


# --- clients ------------------------------------------------------------------------------------

def create_compacted(bootstrap, topic, partitions, config):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"cleanup.policy": "compact", **{k: str(v) for k, v in config.items()}}
    for future in admin.create_topics([NewTopic(topic, partitions, 1, config=configs)]).values():
        future.result(60)


def set_topic_config(bootstrap, topic, key, value):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(key, str(value), incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(60)


def fill(bootstrap, topic, keys, versions, value_bytes, partition=0):
    """Every key once per version, in key order; returns records and seconds. partition=None
    spreads the keys by the client's partitioner."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20,
                         "batch.size": 1000000, "batch.num.messages": 100000,
                         "queue.buffering.max.messages": 2000000,
                         "queue.buffering.max.kbytes": 1048576, "compression.type": "none",
                         "enable.idempotence": False})
    names = [b"key-%09d" % k for k in range(keys)]
    started = time.time()
    for version in range(versions):
        value = (b"v%03d-" % version) + b"x" * (value_bytes - 5)
        for key in names:
            while True:
                try:
                    if partition is None:
                        producer.produce(topic, value, key)
                    else:
                        producer.produce(topic, value, key, partition)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    if producer.flush(300) != 0:
        raise RuntimeError(f"{topic}: records still unsent after 300 s")
    return keys * versions, time.time() - started


def end_offsets(bootstrap, topic, partitions):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-bench"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), 60)[1]
                   for p in range(partitions))
    finally:
        consumer.close()


def throughput(broker, out_dir, messages_per_partition):
    """One skiff-bench throughput run (produce, then Fetch v4) on a fresh topic: start and end
    times and MB/s, or the error."""
    os.makedirs(out_dir, exist_ok=True)
    started = time.time()
    result = subprocess.run(
        [os.path.join(ROOT, "target/release/skiff-bench"), "throughput", "--bootstrap",
         broker.bootstrap, "--broker-pid", str(broker.pid), "--data", out_dir, "--versions", "4",
         "--messages-per-partition", str(messages_per_partition), "--passes", "2", "--repeat", "1",
         "--seconds", "180"], capture_output=True, text=True, env=dict(os.environ, RUST_BACKTRACE="0"))
    match = THROUGHPUT.search(result.stdout + result.stderr)
    run = {"start": started, "end": time.time()}
    if match:
        run.update(produce=int(match.group(1)), fetch=int(match.group(2)))
    else:
        run["error"] = (result.stderr.strip().splitlines() or ["no output"])[-1]
    return run


# --- phases -----------------------------------------------------------------------------------------

def active_base(data, topic):
    """The base offset of `topic`-0's active segment: where a complete cleaning ends."""
    directory = os.path.join(data, f"{topic}-0")
    return max(int(name[:-4]) for name in os.listdir(directory) if name.endswith(".log"))


def wait_for_cleanings(broker, topic, known, timeout, end_offset):
    """Waits until the cleanings of `topic` past the first `known` are over: one reached
    `end_offset`, or none followed the last for a while (a key map that fills up ends a pass
    early; the next pass follows while the log is still dirtier than its ratio); returns every
    cleaning of it."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = cleanings(broker.log_path, topic)
        if any(c["dirty"][1] >= end_offset for c in found[known:]):
            return found
        if len(found) > known:
            # The next pass starts within the backoff and lasts about as long as the last one;
            # a quiet spell of three passes means the log is no longer due.
            last = found[-1]
            quiet = max(5.0, 3 * last["seconds"] + 2 * BACKOFF_MS / 1000)
            if time.time() - last["end"] >= quiet:
                return found
        time.sleep(0.5)
    raise RuntimeError(f"{broker.kind}: {topic} not cleaned up to {end_offset} within {timeout} s")


def windows_figures(samples, found):
    """CPU seconds, cleaner-thread CPU seconds and peak RSS over the cleanings' windows."""
    cpu = thread_cpu = 0.0
    peak_rss = 0
    for cleaning in found:
        start, end = cleaning["end"] - cleaning["seconds"], cleaning["end"]
        cpu += at(samples, end, "cpu") - at(samples, start, "cpu")
        thread_cpu += at(samples, end, "cleaner_cpu") - at(samples, start, "cleaner_cpu")
        inside = [s["rss"] for s in samples if start <= s["t"] <= end + SAMPLE_SECONDS]
        peak_rss = max([peak_rss, *inside])
    return cpu, thread_cpu, peak_rss


def phase_clean(broker, args, topic, versions):
    """Fill, lower the ratio, measure the quiet cleaning."""
    started = process_figures(broker.pid)
    create_compacted(broker.bootstrap, topic, 1, {"segment.bytes": args.segment_bytes,
                                                  "min.cleanable.dirty.ratio": "1.0"})
    records, fill_seconds = fill(broker.bootstrap, topic, args.keys, versions, args.value_bytes)
    produced = end_offsets(broker.bootstrap, topic, 1)
    if produced != records:
        raise RuntimeError(f"{broker.kind}: {topic} holds {produced} records, produced {records}")
    time.sleep(2)
    before = dirty_ratio(broker.data, topic)
    early = cleanings(broker.log_path, topic)
    sampler = Sampler(broker.pid)
    time.sleep(1)
    lowered = time.time()
    set_topic_config(broker.bootstrap, topic, "min.cleanable.dirty.ratio", LOWERED_RATIO)
    found = wait_for_cleanings(broker, topic, len(early), args.clean_timeout,
                               active_base(broker.data, topic))
    time.sleep(1)
    samples = sampler.stop()
    after = dirty_ratio(broker.data, topic)
    mine = found[len(early):]
    cpu, thread_cpu, peak_rss = windows_figures(samples, mine)
    mb = sum(c["mb"] for c in mine)
    seconds = sum(c["seconds"] for c in mine)
    baseline = at(samples, lowered, "rss")
    return {
        "topic": topic, "keys": args.keys, "versions": versions, "records": records,
        "fill_seconds": fill_seconds, "cleaned_early": len(early), "lowered": lowered,
        "cleanings": mine, "mb": mb, "seconds": seconds, "mb_per_s": mb / seconds if seconds else None,
        "cpu_seconds": cpu, "cleaner_thread_cpu_seconds": thread_cpu,
        "cpu_seconds_per_gb": cpu / (mb * MIB / GIB) if mb else None,
        "rss_started": started["rss"], "rss_baseline": baseline, "rss_peak": peak_rss, "dirty_before": before, "dirty_after": after,
        "samples": samples,
    }


def phase_interference(broker, args, topic):
    """Throughput runs on other topics with the cleaner idle, then during one cleaning, then idle."""
    create_compacted(broker.bootstrap, topic, 1, {"segment.bytes": args.segment_bytes,
                                                  "min.cleanable.dirty.ratio": "1.0"})
    fill(broker.bootstrap, topic, args.keys, args.versions, args.value_bytes)
    time.sleep(2)
    known = len(cleanings(broker.log_path, topic))
    runs = []
    out = os.path.join(broker.state, "throughput")
    for i in range(args.idle_runs):
        runs.append({"when": "idle-before", **throughput(broker, f"{out}/before-{i}", args.bench_messages)})
    sampler = Sampler(broker.pid)
    lowered = time.time()
    set_topic_config(broker.bootstrap, topic, "min.cleanable.dirty.ratio", LOWERED_RATIO)
    # The cleaner starts within its backoff; a run counts only when it lies inside the cleaning.
    time.sleep(BACKOFF_MS / 1000 + 0.5)
    for i in range(args.during_runs):
        if len(cleanings(broker.log_path, topic)) > known:
            break
        runs.append({"when": "during", **throughput(broker, f"{out}/during-{i}", args.bench_messages)})
    found = wait_for_cleanings(broker, topic, known, args.clean_timeout,
                               active_base(broker.data, topic))[known:]
    samples = sampler.stop()
    first_start = min(c["end"] - c["seconds"] for c in found)
    last_end = max(c["end"] for c in found)
    for run in runs:
        if run["when"] == "during" and not (first_start <= run["start"] and run["end"] <= last_end):
            run["when"] = "partly-during"
    for i in range(args.idle_runs):
        runs.append({"when": "idle-after", **throughput(broker, f"{out}/after-{i}", args.bench_messages)})
    return {"topic": topic, "lowered": lowered, "cleanings": found, "runs": runs,
            "mb": sum(c["mb"] for c in found), "seconds": sum(c["seconds"] for c in found),
            "samples": samples}


def phase_partitions(broker, args):
    """Many compacted partitions, rolled by segment.ms and cleaned: RSS and open files."""
    topic = "many"
    idle = process_figures(broker.pid)
    create_compacted(broker.bootstrap, topic, args.many_partitions,
                     {"segment.ms": args.many_segment_ms, "min.cleanable.dirty.ratio": "0.5"})
    keys = args.many_partitions * args.many_keys_per_partition
    time.sleep(1)
    created = process_figures(broker.pid)
    fill(broker.bootstrap, topic, keys, 3, args.value_bytes, partition=None)
    # Past segment.ms, one more record per key rolls every partition's segment (Kafka rolls on
    # append), so the three versions before it become cleanable.
    time.sleep(args.many_segment_ms / 1000 + 1)
    sampler = Sampler(broker.pid)
    started = time.time()
    before = all_cleanings(broker.log_path)
    fill(broker.bootstrap, topic, keys, 1, args.value_bytes, partition=None)
    deadline = time.time() + args.clean_timeout
    while time.time() < deadline and all_cleanings(broker.log_path) - before < args.many_partitions:
        time.sleep(1)
    time.sleep(2)
    samples = sampler.stop()
    return {"partitions": args.many_partitions, "keys": keys, "idle": idle, "created": created,
            "cleanings": all_cleanings(broker.log_path) - before,
            "seconds": time.time() - started,
            "rss_peak": max(s["rss"] for s in samples), "fds_peak": max(s["fds"] for s in samples),
            "rss_first": samples[0]["rss"], "fds_first": samples[0]["fds"], "samples": samples}


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def phases(args):
    """Each phase: its name, its brokers' extra settings, and what it runs."""
    return [
        ("clean", {"log.cleaner.dedupe.buffer.size": DEFAULT_DEDUPE_BYTES},
         lambda b: phase_clean(b, args, "compacted", args.versions)),
        ("dedupe-16", {"log.cleaner.dedupe.buffer.size": SMALL_DEDUPE_BYTES},
         lambda b: phase_clean(b, args, "compacted", args.small_versions)),
        ("throttled", {"log.cleaner.io.max.bytes.per.second": THROTTLE_BYTES_PER_SECOND},
         lambda b: phase_interference(b, args, "compacted")),
        ("unthrottled", {}, lambda b: phase_interference(b, args, "compacted")),
        ("partitions", {}, lambda b: phase_partitions(b, args)),
    ]


def measure(kind, name, settings, run, args, results):
    """One phase against one broker kind, on a fresh broker and data directory."""
    result = results.setdefault(kind, {"kind": kind})
    base = {"log.cleaner.backoff.ms": BACKOFF_MS}
    out, state_root = args.out, args.state
    log(f"{kind}: {name} (load {load_average()})")
    try:
        broker = Broker(kind, os.path.join(state_root, f"{kind}-{name}"), {**base, **settings}, args.work)
    except (RuntimeError, subprocess.CalledProcessError) as error:
        log(f"{kind}: {name} did not start: {error}")
        result[name] = {"error": f"did not start: {error}"}
        return result
    try:
        result[name] = {"settings": {**base, **settings}, "load_before": load_average(),
                        **run(broker)}
        result[name]["load_after"] = load_average()
    except Exception as error:  # a failed phase is a recorded outcome; the rest goes on
        log(f"{kind}: {name} failed: {error}")
        result[name] = {"error": str(error)}
    finally:
        broker.stop()
        with open(broker.log_path, errors="replace") as f:
            lines = [ANSI.sub("", line) for line in f]
        with open(os.path.join(out, f"{kind}-{name}-broker.log"), "w") as f:
            # A thousand cleanings' whole blocks are megabytes: there, one line of two each.
            wanted = (lambda line: CLEANED.search(line) or PROCESSED.search(line)) if name == "partitions" \
                else (lambda line: "clean" in line.lower() or "\t" in line[:2])
            f.writelines(line for line in lines if wanted(line) or "ERROR" in line or "WARN" in line)
        shutil.rmtree(broker.state, ignore_errors=True)
    with open(os.path.join(out, f"{kind}.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result


# --- the report -----------------------------------------------------------------------------------

def ratio(a, b):
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def fmt(value, digits=1):
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def rate_series(phase):
    """The cleaner thread's read rate (MiB/s, rchar) per sample interval, seconds since the ratio
    was lowered: the cleaned MB/s over time."""
    samples, points = phase.get("samples", []), []
    for a, b in zip(samples, samples[1:]):
        if b["t"] > a["t"]:
            points.append((b["t"] - phase["lowered"],
                           (b["cleaner_read"] - a["cleaner_read"]) / MIB / (b["t"] - a["t"])))
    # Smoothed over one second: a 0.2 s sample sees one 512 KiB buffer more or less.
    window = max(1, int(round(1 / SAMPLE_SECONDS)))
    return [(points[i][0], sum(p[1] for p in points[max(0, i - window + 1):i + 1]) /
             len(points[max(0, i - window + 1):i + 1])) for i in range(len(points))]


def svg_lines(title, series, x_unit, y_unit, note):
    """A line per series: series is [(name, colour, [(x, y), ...]), ...]."""
    width, height = 980, 420
    left, right, top, bottom = 70, 150, 50, 50
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [x for _, _, points in series for x, _ in points] or [1]
    ys = [y for _, _, points in series for _, y in points] or [1]
    x_max, y_max = max(max(xs), 1), max(max(ys), 1) * 1.1
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{title}</text>',
           f'<text x="{width / 2}" y="40" text-anchor="middle" fill="#555">{note}</text>']
    for i in range(6):
        y = top + plot_h - plot_h * i / 5
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{y_max * i / 5:,.0f}</text>')
        x = left + plot_w * i / 5
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{x_max * i / 5:,.0f}</text>')
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 10}" text-anchor="middle">{x_unit}</text>')
    out.append(f'<text x="16" y="{top + plot_h / 2}" transform="rotate(-90 16 {top + plot_h / 2})" '
               f'text-anchor="middle">{y_unit}</text>')
    for n, (name, colour, points) in enumerate(series):
        path = " ".join(f"{left + plot_w * x / x_max:.1f},{top + plot_h - plot_h * y / y_max:.1f}"
                        for x, y in points)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}"/>')
        out.append(f'<rect x="{left + plot_w + 15}" y="{top + 20 * n}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{left + plot_w + 32}" y="{top + 20 * n + 10}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def interference_figures(phase):
    """Median produce and fetch MB/s idle (before and after) and during the cleaning."""
    if not phase or "runs" not in phase:
        return None
    def of(whens, key):
        return median([r.get(key) for r in phase["runs"] if r["when"] in whens])
    figures = {}
    for key in ("produce", "fetch"):
        idle, during = of(("idle-before", "idle-after"), key), of(("during",), key)
        figures[key] = (idle, during, ratio(during, idle))
    figures["during_runs"] = sum(1 for r in phase["runs"] if r["when"] == "during")
    figures["partly_runs"] = sum(1 for r in phase["runs"] if r["when"] == "partly-during")
    figures["errors"] = [r["error"] for r in phase["runs"] if "error" in r]
    return figures


def render(data_dir, reports_dir):
    """bench/reports/compaction.md and its plots from the run's JSON."""
    with open(os.path.join(data_dir, "run.json")) as f:
        run = json.load(f)
    results = {}
    for kind in ("skiff", "kafka"):
        path = os.path.join(data_dir, f"{kind}.json")
        if os.path.exists(path):
            with open(path) as f:
                results[kind] = json.load(f)
    skiff, kafka = results.get("skiff", {}), results.get("kafka", {})
    lines = [
        "# Log cleaner against Apache Kafka 4.1.1 (issue 37, performance)", "",
        "```sh", run["command"], "```", "",
        "Its arguments, defaults included: " + ", ".join(
            f"`--{k.replace('_', '-')} {v}`" for k, v in run["args"].items()
            if k not in ("out", "reports", "state", "work", "render", "skip_build", "phases", "brokers")) + ".", "",
        f"Run {run['started']} – {run['finished']} UTC, commit {run['commit']}, {run['machine']}; "
        f"load average (1/5/15 min) {run['load_before']} before and {run['load_after']} after: "
        "the machine's 2 cores were shared with other sessions, so compare only within this run, "
        "as ratios. Phase by phase, both brokers back to back (" + ", ".join(run["order"]) +
        " first in the odd phases, last in the even ones), each phase on a fresh broker and data "
        "directory.", "",
        f"Settings on both: 1 partition, `cleanup.policy=compact`, `segment.bytes={run['args']['segment_bytes']}`, "
        f"{run['args']['keys']:,} distinct keys × {run['args']['versions']} versions of "
        f"{run['args']['value_bytes']}-byte values (keys `key-%09d`, every key once per version), "
        "produced with confluent-kafka (acks=1, no compression, not idempotent) while "
        "`min.cleanable.dirty.ratio=1.0` (both brokers clean only above it), then lowered to 0.5 with "
        f"IncrementalAlterConfigs; `log.cleaner.threads=1`, `log.cleaner.backoff.ms={BACKOFF_MS}`, "
        "`log.cleaner.dedupe.buffer.size` 128 MiB (Kafka's default) unless said. Kafka runs on Java 17 "
        "with `-Xmx1g -Xms1g` and G1 (its scripts' flags). MB = 2^20 bytes, as both brokers' log lines.", "",
    ]
    # The reading of the run (targets met or missed and why), written after it beside its data.
    notes = os.path.join(data_dir, "notes" + ".md")  # written by hand beside the data
    if os.path.exists(notes):
        with open(notes) as f:
            lines += [f.read().rstrip(), ""]
    lines += render_clean(skiff.get("clean"), kafka.get("clean"))
    lines += render_memory(skiff, kafka)
    lines += render_interference(skiff, kafka)
    lines += render_partitions(skiff.get("partitions"), kafka.get("partitions"), run)
    svg_names = write_plots(skiff, kafka, reports_dir)
    lines += ["## Plots", ""] + [f"![{name}]({name})" for name in svg_names] + [""]
    lines += ["Raw data: `bench/reports/data/compaction/` (`skiff.json`, `kafka.json`: every phase "
              "with its /proc samples and cleanings; `*-broker.log`: the cleaner's lines). "
              "`bench/scripts/compaction.py --render` writes this report again from them.", ""]
    with open(os.path.join(reports_dir, REPORT_NAME + ".md"), "w") as f:
        f.write("\n".join(lines))


def render_clean(s, k):
    out = ["## 1. Cleaner throughput and CPU", ""]
    if not s or not k or "error" in s or "error" in k:
        return out + [f"Not measured: skiff {s and s.get('error')}, kafka {k and k.get('error')}.", ""]
    rows = [
        ("log cleaned (MB, summed over passes)", s["mb"], k["mb"], 1, None),
        ("cleanings (passes)", len(s["cleanings"]), len(k["cleanings"]), 0, None),
        ("seconds cleaning (the lines' own)", s["seconds"], k["seconds"], 1, None),
        # Skiff's line counts re-read chunk tails; the targets are judged by the files below.
        ("MB/s of log cleaned (by the lines)", s["mb_per_s"], k["mb_per_s"], 1, None),
        ("broker CPU s per GB cleaned (by the lines; process user+system)", s["cpu_seconds_per_gb"],
         k["cpu_seconds_per_gb"], 2, None),
        ("log cleaned by the files (MB: sealed segments before)", s["dirty_before"]["sealed_bytes"] / MIB,
         k["dirty_before"]["sealed_bytes"] / MIB, 1, None),
        ("**MB/s by the files** (sealed MB before / seconds)", files_rate(s), files_rate(k), 1, "≥ 1: "),
        ("**broker CPU s per GB by the files**", files_cpu(s), files_cpu(k), 2, "≤ 1: "),
        ("cleaner thread CPU s per GB by the files", s["cleaner_thread_cpu_seconds"] /
         (s["dirty_before"]["sealed_bytes"] / GIB), k["cleaner_thread_cpu_seconds"] /
         (k["dirty_before"]["sealed_bytes"] / GIB), 2, None),
        ("fill (s, confluent-kafka, same for both)", s["fill_seconds"], k["fill_seconds"], 1, None),
    ]
    out += ["| measure | Skiff | Kafka 4.1.1 | Skiff / Kafka | target |", "|---|---:|---:|---:|---|"]
    for name, a, b, digits, target in rows:
        r = ratio(a, b)
        verdict = ""
        if target and r is not None:
            met = r >= 1 if target.startswith("≥") else r <= 1
            verdict = f"{target}{'met' if met else '**missed**'}"
        out.append(f"| {name} | {fmt(a, digits)} | {fmt(b, digits)} | {fmt(r, 2)} | {verdict} |")
    kafka_map = [c.get("map_seconds") for c in k["cleanings"]]
    out += ["", f"Kafka's lines split its time: key map {fmt(sum(x for x in kafka_map if x), 1)} s of "
            f"{fmt(k['seconds'], 1)} s. Broker CPU is counted over the cleanings' windows (each "
            "line's time minus its seconds), from /proc/<pid>/stat sampled every "
            f"{SAMPLE_SECONDS} s; the cleaner thread's CPU from its /proc task. Dirty ratio of the "
            f"log (sealed segments, from the files and `cleaner-offset-checkpoint`): Skiff "
            f"{fmt(s['dirty_before']['ratio'], 3)} → {fmt(s['dirty_after']['ratio'], 3)}, Kafka "
            f"{fmt(k['dirty_before']['ratio'], 3)} → {fmt(k['dirty_after']['ratio'], 3)}; log size "
            f"Skiff {fmt(s['dirty_before']['log_bytes'] / MIB, 0)} → {fmt(s['dirty_after']['log_bytes'] / MIB, 0)} MiB, "
            f"Kafka {fmt(k['dirty_before']['log_bytes'] / MIB, 0)} → {fmt(k['dirty_after']['log_bytes'] / MIB, 0)} MiB. "
            f"Cleanings before the ratio was lowered: Skiff {s['cleaned_early']}, Kafka {k['cleaned_early']}.", ""]
    return out


def files_rate(phase):
    """MB/s with the megabytes the log's sealed segments held before a one-pass cleaning (the
    bytes each broker had to read once), so both count alike whatever their lines count."""
    if len(phase["cleanings"]) != 1 or not phase["seconds"]:
        return None
    return phase["dirty_before"]["sealed_bytes"] / MIB / phase["seconds"]


def files_cpu(phase):
    if len(phase["cleanings"]) != 1:
        return None
    return phase["cpu_seconds"] / (phase["dirty_before"]["sealed_bytes"] / GIB)


def render_memory(skiff, kafka):
    out = ["## 2. Key-map memory per key and the dedupe buffer bound", "",
           f"Skiff's key map takes {SKIFF_SLOT_BYTES} bytes per slot (storage's `OFFSET_MAP_SLOT_BYTES`: "
           "a 128-bit key hash and a 4-byte offset relative to the pass's first dirty offset) against Kafka's 24 (`SkimpyOffsetMap`: a 16-byte "
           f"MD5 and the offset); at the load factor 0.9 both use, that is {SKIFF_SLOT_BYTES / 0.9:.1f} "
           f"against {24 / 0.9:.1f} bytes per key held, so a 128 MiB buffer holds "
           f"{int(128 * MIB / SKIFF_SLOT_BYTES * 0.9):,} keys in Skiff and {int(128 * MIB / 24 * 0.9):,} in Kafka.", "",
           "RSS of the broker just after its start, just before the ratio was lowered (the log "
           "filled), and at its peak over the cleanings' windows. Kafka's dedupe buffer lies in its "
           "Java heap (`-Xms1g`), so its RSS says little about the buffer; it is shown for scale.", "",
           "| broker | buffer | keys × versions | passes | RSS at start | RSS before | RSS peak | growth in the cleaning |",
           "|---|---:|---|---:|---:|---:|---:|---:|"]
    for kind, result in (("Skiff", skiff), ("Kafka 4.1.1", kafka)):
        for phase, buffer in (("clean", DEFAULT_DEDUPE_BYTES), ("dedupe-16", SMALL_DEDUPE_BYTES)):
            p = result.get(phase)
            if not p or "error" in p:
                out.append(f"| {kind} | {buffer // MIB} MiB | – | – | – | – | – | {p and p.get('error')} |")
                continue
            growth = p["rss_peak"] - p["rss_baseline"]
            out.append(f"| {kind} | {buffer // MIB} MiB | {p['keys']:,} × {p['versions']} | {len(p['cleanings'])} | "
                       f"{fmt(p.get('rss_started', 0) / MIB, 0)} MiB | "
                       f"{fmt(p['rss_baseline'] / MIB, 0)} MiB | {fmt(p['rss_peak'] / MIB, 0)} MiB | "
                       f"{fmt(growth / MIB, 0)} MiB |")
    s16 = skiff.get("dedupe-16")
    if s16 and "error" not in s16:
        out += ["", f"At 16 MiB, Skiff's MB/s {fmt(s16['mb_per_s'])} and CPU {fmt(s16['cpu_seconds_per_gb'], 2)} s/GB; "
                + (f"Kafka's {fmt(kafka['dedupe-16']['mb_per_s'])} and {fmt(kafka['dedupe-16']['cpu_seconds_per_gb'], 2)}."
                   if kafka.get("dedupe-16") and "error" not in kafka["dedupe-16"] else "")]
    return out + [""]


def render_interference(skiff, kafka):
    out = ["## 3. Produce and fetch on another topic while the cleaner runs", "",
           "`skiff-bench throughput --versions 4` (12 partitions × 1 kB, produce then two timed "
           "Fetch v4 passes, a fresh topic per run): idle runs before and after the cleaning (their "
           "median), and runs while the cleaner cleans the filled log (only runs wholly inside the "
           "cleaning count). Throttled: `log.cleaner.io.max.bytes.per.second` = 50 MiB/s.", "",
           "| broker | cleaner | produce idle → during (MB/s) | ratio | Fetch v4 idle → during (MB/s) | ratio | runs during | cleaning (MB in s) | target |",
           "|---|---|---|---:|---|---:|---:|---|---|"]
    for kind, result in (("Skiff", skiff), ("Kafka 4.1.1", kafka)):
        for phase in ("throttled", "unthrottled"):
            p = result.get(phase)
            figures = interference_figures(p)
            if not figures:
                out.append(f"| {kind} | {phase} | {p and p.get('error')} | | | | | | |")
                continue
            (pi, pd, pr), (fi, fd, fr) = figures["produce"], figures["fetch"]
            target = ""
            if phase == "throttled" and kind == "Skiff" and pr is not None and fr is not None:
                target = "≥ 0.85: " + ("met" if min(pr, fr) >= 0.85 else "**missed**")
            out.append(f"| {kind} | {phase} | {fmt(pi, 0)} → {fmt(pd, 0)} | {fmt(pr, 2)} | {fmt(fi, 0)} → "
                       f"{fmt(fd, 0)} | {fmt(fr, 2)} | {figures['during_runs']} (+{figures['partly_runs']} partly) | "
                       f"{fmt(p['mb'], 0)} in {fmt(p['seconds'], 1)} | {target} |")
            if figures["errors"]:
                out.append(f"| | | errors: {'; '.join(figures['errors'][:2])} | | | | | | |")
    return out + [""]


def render_partitions(s, k, run):
    a = run["args"]
    out = ["## 4. Compacted partitions at scale", "",
           f"{a['many_partitions']:,} partitions of one compacted topic (`segment.ms={a['many_segment_ms']}`), "
           f"{a['many_keys_per_partition']} keys per partition × 3 versions, then one more version after "
           "`segment.ms` so every partition rolls and has a cleanable segment; RSS and open files sampled "
           "from just before that last version until the cleaner has gone through them. Documented "
           "bounds (docs/benchmarks.md, partitions at scale): about 5 KiB of RSS per idle partition, "
           "and open files at most `skiff.log.files.max` (4,096) + 14. Skiff allocates its key map (the "
           "dedupe buffer) when it starts, so every figure here holds it.", "",
           "| broker | cleanings | RSS idle → topic created → records in (before the cleaner) → peak | per partition: created, records in | peak − before the cleaner | open files idle → created → peak | files bound |",
           "|---|---:|---|---|---:|---|---|"]
    for kind, p in (("Skiff", s), ("Kafka 4.1.1", k)):
        if not p or "error" in p:
            out.append(f"| {kind} | {p and p.get('error')} | | | | | |")
            continue
        n, idle, created, first = p["partitions"], p["idle"], p["created"], p["rss_first"]
        files_bound = "–"
        if kind == "Skiff":
            limit = LOG_FILES_MAX + 14
            files_bound = f"{limit:,}: {'met' if p['fds_peak'] <= limit else '**missed**'}"
        out.append(
            f"| {kind} | {p['cleanings']:,} | {fmt(idle['rss'] / MIB, 0)} → {fmt(created['rss'] / MIB, 0)} → "
            f"{fmt(first / MIB, 0)} → {fmt(p['rss_peak'] / MIB, 0)} MiB | "
            f"{fmt((created['rss'] - idle['rss']) / n / 1024, 1)} KiB, {fmt((first - idle['rss']) / n / 1024, 1)} KiB | "
            f"{fmt((p['rss_peak'] - first) / MIB, 1)} MiB | {idle['fds']:,} → {created['fds']:,} → {p['fds_peak']:,} | "
            f"{files_bound} |")
    return out + [""]


def write_plots(skiff, kafka, reports_dir):
    names = []
    series = []
    for kind, colour, result in (("Skiff", "#1f77b4", skiff), ("Kafka 4.1.1", "#d62728", kafka)):
        for phase, dash in (("clean", ""), ("throttled", " (throttled)")):
            p = result.get(phase)
            if p and "samples" in p:
                series.append((kind + dash, colour if not dash else colour + "88", rate_series(p)))
    if series:
        name = "compaction-cleaned-mbs.svg"
        with open(os.path.join(reports_dir, name), "w") as f:
            f.write(svg_lines("Cleaned MB/s over time (cleaner thread's reads, 1 s mean)", series,
                              "seconds since min.cleanable.dirty.ratio was lowered", "MiB/s",
                              "1 partition, 1 GB-scale log; the throttled run at 50 MiB/s"))
        names.append(name)
    groups, values = [], []
    for phase, label in (("clean", "128 MiB buffer"), ("dedupe-16", "16 MiB buffer")):
        row = []
        for result in (skiff, kafka):
            p = result.get(phase)
            ok = p and "dirty_before" in p
            row += [p["dirty_before"]["ratio"] if ok else None, p["dirty_after"]["ratio"] if ok else None]
        groups.append(label)
        values.append(row)
    name = "compaction-dirty-ratio.svg"
    with open(os.path.join(reports_dir, name), "w") as f:
        f.write(peers_report.svg_bars("Dirty ratio before and after the cleaning", groups,
                                      ["Skiff before", "Skiff after", "Kafka before", "Kafka after"],
                                      values, "dirty ratio", "sealed segments' bytes past the first dirty offset over all sealed bytes"))
    names.append(name)
    return names


# --- main -------------------------------------------------------------------------------------------

SKIFF_SLOT_BYTES = 20


def slot_bytes():
    """OFFSET_MAP_SLOT_BYTES as storage defines it."""
    with open(os.path.join(ROOT, "storage/src/cleaner/offset_map.rs")) as f:
        match = re.search(r"pub const OFFSET_MAP_SLOT_BYTES: usize = (\d+);", f.read())
    return int(match.group(1))


def main():
    global SKIFF_SLOT_BYTES
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="skiff,kafka")
    parser.add_argument("--phases", default="clean,dedupe-16,throttled,unthrottled,partitions")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--small-versions", type=int, default=3, help="versions of the 16 MiB phase")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--segment-bytes", type=int, default=64 * MIB)
    parser.add_argument("--bench-messages", type=int, default=8192, help="skiff-bench messages per partition")
    parser.add_argument("--idle-runs", type=int, default=3, help="idle throughput runs before and after")
    parser.add_argument("--during-runs", type=int, default=20, help="most throughput runs during a cleaning")
    parser.add_argument("--many-partitions", type=int, default=1000)
    parser.add_argument("--many-keys-per-partition", type=int, default=20)
    parser.add_argument("--many-segment-ms", type=int, default=10000)
    parser.add_argument("--clean-timeout", type=int, default=900)
    parser.add_argument("--work", default="/tmp/skiff-peers", help="Kafka's jars (shared with peers.sh)")
    parser.add_argument("--state", default="/tmp/skiff-compaction", help="brokers' data (removed)")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench/reports/data/compaction"))
    parser.add_argument("--reports", default=os.path.join(ROOT, "bench/reports"))
    parser.add_argument("--skip-build", action="store_true")
    parser.add_argument("--render", action="store_true", help="only write the report from --out")
    args = parser.parse_args()
    SKIFF_SLOT_BYTES = slot_bytes()
    args.phases = args.phases.split(",")
    if args.render:
        render(args.out, args.reports)
        return
    if not args.skip_build:
        log("building the release skiff and skiff-bench")
        subprocess.run(["nice", "cargo", "build", "--release", "-q", "-p", "skiff-broker", "-p", "skiff-bench"],
                       cwd=ROOT, check=True)
    kinds = args.brokers.split(",")
    if "kafka" in kinds:
        install_kafka(args.work)
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    run = {"command": "bench/scripts/compaction.py " + " ".join(sys.argv[1:]),
           "started": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "order": kinds,
           "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip(),
           "machine": machine(), "load_before": load_average(),
           "args": {k: v for k, v in vars(args).items()}}
    # Phase by phase, both brokers back to back (the second phase in the other order), so the
    # machine's changing load falls on both alike.
    results = {}
    for index, (name, settings, run_phase) in enumerate(phases(args)):
        if name not in args.phases:
            continue
        for kind in (kinds if index % 2 == 0 else kinds[::-1]):
            measure(kind, name, settings, run_phase, args, results)
    run.update(finished=time.strftime("%H:%M", time.gmtime()), load_after=load_average())
    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump(run, f, indent=1)
    render(args.out, args.reports)
    log("wrote bench/reports/compaction.md")


def machine():
    with open("/proc/cpuinfo") as f:
        model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    return f"{os.cpu_count()} × {model}, {java}"


if __name__ == "__main__":
    main()
