#!/usr/bin/env python3
"""Partition scale of one Skiff broker (issue 20): creates --partitions partitions (topics of
--per-topic each), one 100-byte message in each, and measures

- creation time, idle RSS, open files and memory maps of the broker;
- Metadata (v1, every topic) round trip, median and max of --metadata-runs;
- clean shutdown (SIGTERM to exit) and the clean restart's time to listen;
- after SIGKILL: time to listen, and time until Metadata shows every partition led (no
  LEADER_NOT_AVAILABLE), then a produce to and a fetch from the last partition;
- with --idle-connections N: the broker's open files while N idle client connections are open,
  and whether a produce to every partition and a fetch of every partition still succeed then
  (the issue's 10,000 partitions and 10,000 connections within a 20,000-file limit).

The clean shutdown is measured twice: idle (after the kernel wrote recent writes back) and right
after a message to every partition (the close then writes those pages of 10,000 files). With
--checkpoint-idle-s S, twice more: after a message to every partition and S seconds of idling
(pass S past the broker's `log.flush.offset.checkpoint.interval.ms`, set short with --set, so a
periodic checkpoint has synced them), and the same with --foreign-dirty-mib MiB written (not
synced) by another writer to the data directory's file system just before the SIGTERM. Each
shutdown row names the machine-wide dirty page cache (/proc/meminfo Dirty) and 1-minute load at
the SIGTERM.

Usage: bench/scripts/partition-scale.py --skiff target/release/skiff --partitions 10000
       [--idle-connections 10000] [--out FILE]
It prints a markdown table (and writes it to --out). The broker runs on 127.0.0.1 with a free port
and a temporary data directory, under this shell's limits (see `ulimit -n`).
"""

import argparse
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

LISTENING = re.compile(r"skiff listening on (\S+):(\d+)")
START_TIMEOUT_S = 300


class Broker:
    def __init__(self, binary, data_dir, settings):
        self.binary, self.data_dir, self.settings = binary, data_dir, settings
        self.process, self.port = None, 0

    def start(self):
        """Starts the broker; returns seconds until it printed that it listens."""
        args = [self.binary, "serve", "--set", f"log.dirs={self.data_dir}",
                "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.port}"]
        for setting in self.settings:
            args += ["--set", setting]
        began = time.monotonic()
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, env=dict(os.environ, SKIFF_LOG="warn"))
        while time.monotonic() - began < START_TIMEOUT_S:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("broker exited during start")
            match = LISTENING.search(line)
            if match:
                elapsed = time.monotonic() - began
                self.port = int(match.group(2))
                threading.Thread(target=lambda: [None for _ in self.process.stdout], daemon=True).start()
                return elapsed
        raise RuntimeError("broker did not start")

    def stop(self, sig):
        """Sends `sig`; returns seconds until the process exited."""
        began = time.monotonic()
        self.process.send_signal(sig)
        self.process.wait(600)
        return time.monotonic() - began

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def proc(self, name):
        return f"/proc/{self.process.pid}/{name}"

    def rss_mib(self):
        with open(self.proc("status")) as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def open_files(self):
        return len(os.listdir(self.proc("fd")))

    def maps(self):
        with open(self.proc("maps")) as maps:
            return sum(1 for _ in maps)


def metadata_all(bootstrap):
    """One Metadata v1 request for every topic on a fresh socket: (seconds, partitions,
    partitions with an error)."""
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port))) as sock:
        client = b"partition-scale"
        body = struct.pack(">hhih", 3, 1, 7, len(client)) + client + struct.pack(">i", -1)
        began = time.monotonic()
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", read_exact(sock, 4))[0]
        frame = read_exact(sock, size)
        elapsed = time.monotonic() - began
    return (elapsed,) + count_partitions(frame)


def read_exact(sock, count):
    chunks, got = [], 0
    while got < count:
        chunk = sock.recv(min(count - got, 1 << 20))
        if not chunk:
            raise RuntimeError("connection closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def count_partitions(frame):
    at = 4  # correlation id

    def take(fmt):
        nonlocal at
        values = struct.unpack_from(fmt, frame, at)
        at += struct.calcsize(fmt)
        return values[0] if len(values) == 1 else values

    def string():
        nonlocal at
        length = take(">h")
        at += max(length, 0)

    for _ in range(take(">i")):  # brokers
        take(">i"), string(), take(">i"), string()
    take(">i")  # controller
    partitions = errors = 0
    for _ in range(take(">i")):
        take(">h"), string(), take(">b")
        for _ in range(take(">i")):
            error, _, _ = take(">hii")
            partitions += 1
            errors += error != 0
            for _ in range(2):  # replicas, isr
                count = take(">i")
                at += 4 * count
    return partitions, errors


IDLE_WRITEBACK_S = 35


def dirty_mib():
    """Dirty page cache of the whole machine (other processes' too), MiB."""
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("Dirty:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def at_stop():
    """Machine-wide dirty page cache and 1-minute load, for a shutdown row."""
    return f"dirty {dirty_mib():.0f} MiB machine-wide, load {os.getloadavg()[0]:.2f}"


def write_unsynced(path, mib):
    """`mib` MiB of another writer's data, left in the page cache (no fsync)."""
    block = os.urandom(1 << 20)
    with open(path, "wb") as out:
        for _ in range(mib):
            out.write(block)


def produce_everywhere(bootstrap, topics, per_topic, extra):
    """One 100-byte message to every partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "queue.buffering.max.messages": 1_000_000, **extra})
    for name in topics:
        for partition in range(per_topic):
            producer.produce(name, value=b"x" * 100, partition=partition)
        producer.poll(0)
    assert producer.flush(300) == 0


def raise_file_limit():
    """Raises this process's soft RLIMIT_NOFILE to its hard limit (for the idle connections)."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def open_idle(broker, count):
    """`count` idle TCP connections to the broker (accepted by it, never sending a request)."""
    connections = []
    for _ in range(count):
        connections.append(socket.create_connection(("127.0.0.1", broker.port), timeout=10))
    return connections


def consume_everywhere(bootstrap, topics, per_topic):
    """Partitions of `topics` from which a fetch from offset 0 returned a message (60 s at most)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-fetch",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(name, partition, 0) for name in topics
                     for partition in range(per_topic)])
    seen = set()
    deadline = time.monotonic() + 60
    wanted = len(topics) * per_topic
    while len(seen) < wanted and time.monotonic() < deadline:
        for message in consumer.consume(1000, timeout=1):
            if message.error() is None:
                seen.add((message.topic(), message.partition()))
    consumer.close()
    return len(seen)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--skiff", default="target/release/skiff")
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--metadata-runs", type=int, default=5)
    parser.add_argument("--set", action="append", default=[], dest="settings")
    parser.add_argument("--idle-connections", type=int, default=0)
    parser.add_argument("--checkpoint-idle-s", type=float, default=0)
    parser.add_argument("--foreign-dirty-mib", type=int, default=0)
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.idle_connections:
        raise_file_limit()
    topics = [f"scale-{index}" for index in range(args.partitions // args.per_topic)]
    total = len(topics) * args.per_topic
    data_dir = tempfile.mkdtemp(prefix="skiff-scale-")
    rows = []
    try:
        broker = Broker(os.path.abspath(args.skiff), data_dir, args.settings)
        broker.start()
        time.sleep(1)
        empty_rss = broker.rss_mib()
        rows.append(("RSS at start, no topics", f"{empty_rss:.0f} MiB"))
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        began = time.monotonic()
        for first in range(0, len(topics), 10):
            futures = admin.create_topics([NewTopic(name, num_partitions=args.per_topic,
                                                    replication_factor=1)
                                           for name in topics[first:first + 10]],
                                          request_timeout=600)
            for future in futures.values():
                future.result(600)
        rows.append(("create all partitions", f"{time.monotonic() - began:.1f} s"))
        began = time.monotonic()
        produce_everywhere(broker.bootstrap, topics, args.per_topic, {})
        rows.append(("one message to every partition", f"{time.monotonic() - began:.1f} s"))
        time.sleep(5)
        idle_rss = broker.rss_mib()
        rows.append(("RSS, idle", f"{idle_rss:.0f} MiB "
                     f"({(idle_rss - empty_rss) * 1024 * 1024 / total:.0f} B per partition)"))
        rows.append(("open files", f"{broker.open_files()}"))
        rows.append(("memory maps", f"{broker.maps()}"))
        # Producer state: one idempotent producer writes to every partition (one entry each).
        produce_everywhere(broker.bootstrap, topics, args.per_topic, {"enable.idempotence": True})
        time.sleep(2)
        producers_rss = broker.rss_mib()
        rows.append(("RSS with one idempotent producer's state in every partition",
                     f"{producers_rss:.0f} MiB ({(producers_rss - idle_rss) * 1024 * 1024 / total:.0f} B per partition)"))
        # Offsets cache: one group commits an offset for every partition.
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "scale",
                             "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition(name, partition, 1) for name in topics
                                 for partition in range(args.per_topic)], asynchronous=False)
        consumer.close()
        time.sleep(2)
        offsets_rss = broker.rss_mib()
        rows.append(("RSS with a committed offset for every partition",
                     f"{offsets_rss:.0f} MiB ({(offsets_rss - producers_rss) * 1024 * 1024 / total:.0f} B per partition)"))
        runs = [metadata_all(broker.bootstrap) for _ in range(args.metadata_runs)]
        assert all(run[1] >= total for run in runs), runs
        times = sorted(run[0] * 1000 for run in runs)
        rows.append((f"Metadata v1, all {runs[0][1]} partitions (median, max of {len(runs)})",
                     f"{times[len(times) // 2]:.1f} ms, {times[-1]:.1f} ms"))
        if args.idle_connections:
            began = time.monotonic()
            try:
                idle = open_idle(broker, args.idle_connections)
            except OSError as error:
                idle = None
                rows.append((f"{args.idle_connections} idle connections", f"failed: {error}"))
            if idle is not None:
                time.sleep(2)
                rows.append((f"{args.idle_connections} idle connections opened",
                             f"{time.monotonic() - began:.1f} s"))
                rows.append((f"open files with {len(idle)} idle connections",
                             f"{broker.open_files()}"))
                began = time.monotonic()
                try:
                    produce_everywhere(broker.bootstrap, topics, args.per_topic, {})
                    rows.append((f"a message to every partition, {len(idle)} idle connections open",
                                 f"ok, {time.monotonic() - began:.1f} s"))
                except Exception as error:  # the figure is the failure
                    rows.append((f"a message to every partition, {len(idle)} idle connections open",
                                 f"failed: {error!r}"))
                began = time.monotonic()
                fetched = consume_everywhere(broker.bootstrap, topics, args.per_topic)
                rows.append((f"partitions fetched from offset 0, {len(idle)} idle connections open",
                             f"{fetched} of {total}, {time.monotonic() - began:.1f} s"))
                rows.append((f"open files after that", f"{broker.open_files()}"))
                rows.append(("broker alive", f"{broker.process.poll() is None}"))
                for connection in idle:
                    connection.close()
                time.sleep(1)
        # Idle: the kernel has written the last writes back (vm.dirty_expire_centisecs, 30 s by
        # default), as on a broker that has been quiet for a while.
        time.sleep(IDLE_WRITEBACK_S)
        rows.append((f"clean shutdown, idle {IDLE_WRITEBACK_S} s (SIGTERM to exit; {at_stop()})",
                     f"{broker.stop(signal.SIGTERM):.2f} s"))
        rows.append(("clean restart: listening", f"{broker.start():.2f} s"))
        rows.append(("RSS after clean restart", f"{broker.rss_mib():.0f} MiB"))
        # Busy: a message to every partition just before, so the close writes 10,000 files'
        # fresh pages (and their new checkpoints) to disk.
        produce_everywhere(broker.bootstrap, topics, args.per_topic, {})
        rows.append((f"clean shutdown right after a message to every partition ({at_stop()})",
                     f"{broker.stop(signal.SIGTERM):.2f} s"))
        if args.checkpoint_idle_s:
            for foreign_mib in sorted({0, args.foreign_dirty_mib}):
                broker.start()
                produce_everywhere(broker.bootstrap, topics, args.per_topic, {})
                time.sleep(args.checkpoint_idle_s)
                foreign = os.path.join(os.path.dirname(data_dir), f"{os.path.basename(data_dir)}-foreign")
                if foreign_mib:
                    write_unsynced(foreign, foreign_mib)
                what = (f"{foreign_mib} MiB of another writer's unsynced data, " if foreign_mib
                        else "")
                rows.append((f"clean shutdown {args.checkpoint_idle_s:g} s after a message to every "
                             f"partition ({what}{at_stop()})",
                             f"{broker.stop(signal.SIGTERM):.2f} s"))
                if foreign_mib:
                    os.remove(foreign)
        broker.start()
        broker.stop(signal.SIGKILL)
        listen_s = broker.start()
        began = time.monotonic() - listen_s
        rows.append(("after SIGKILL: listening", f"{listen_s:.2f} s"))
        first_errors = None
        while True:
            _, partitions, errors = metadata_all(broker.bootstrap)
            if first_errors is None:
                first_errors = errors
            if errors == 0 and partitions >= total:
                break
            time.sleep(0.05)
        rows.append(("after SIGKILL: every partition recovered",
                     f"{time.monotonic() - began:.2f} s ({first_errors} not yet at first Metadata)"))
        rows.append(("RSS after recovery", f"{broker.rss_mib():.0f} MiB"))
        rows.append(("open files after recovery", f"{broker.open_files()}"))
        broker.stop(signal.SIGTERM)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    load = os.getloadavg()
    lines = [f"`{' '.join(['bench/scripts/partition-scale.py'] + sys.argv[1:])}`, "
             f"{total} partitions ({len(topics)} topics x {args.per_topic}), load average at the "
             f"end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1/5/15 min), "
             f"{os.cpu_count()} cores", "", "| measure | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text)


if __name__ == "__main__":
    main()
