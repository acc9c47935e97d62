#!/usr/bin/env python3
"""The replication benchmark of issue 16, in one run on this machine:
1. produce throughput with acks=all to an RF 3 topic on 3 brokers (3 etcd members, loopback)
   against acks=1 to an RF 1 topic on a single broker, both with Apache Kafka's own
   ProducerPerformance (1 kB records, 12 partitions), reported as a ratio;
2. the follower lag while the acks=all load runs: every led partition's
   `skiff_partition_follower_lag` (offsets its furthest-behind follower lacks) scraped from every
   broker every 100 ms, p50/p99/max over all partitions and samples, and in time at the run's
   per-partition rate;
3. consumer fetch throughput from the leaders (ConsumerPerformance) while a second acks=all load
   keeps the followers replicating.

Needs a release broker with etcd support (`cargo build --release -p skiff-broker --features etcd`),
etcd on PATH and the Java classpath of tests/clients (scripts/install-clients.sh).
    python3 bench/scripts/replication.py [--records N] [--out bench/reports/replication.md]
"""

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "clients"))

from conftest import Broker  # noqa: E402
from etcd_cluster import EtcdCluster  # noqa: E402
from test_cluster import SkiffCluster, agreed_controller, metrics  # noqa: E402

CLASSPATH = (ROOT / "tests" / "clients" / "java" / "target" / "classpath.txt").read_text().strip()
PARTITIONS = 12
RATE = re.compile(r"([\d.]+) records/sec \(([\d.]+) MB/sec\)")


def java(*args):
    result = subprocess.run(["java", "-cp", CLASSPATH, *map(str, args)], capture_output=True, text=True,
                            timeout=900)
    if result.returncode != 0:
        raise RuntimeError(result.stdout + result.stderr)
    return result.stdout


def create(bootstrap, topic, replicas):
    java("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--create",
         "--topic", topic, "--partitions", PARTITIONS, "--replication-factor", replicas)


def produce(bootstrap, topic, records, acks):
    out = java("org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", records,
               "--record-size", 1000, "--throughput", -1, "--producer-props",
               f"bootstrap.servers={bootstrap}", f"acks={acks}", "linger.ms=5", "batch.size=65536")
    last = [line for line in out.splitlines() if "records sent" in line][-1]
    rate, mb = RATE.search(last).groups()
    return float(rate), float(mb), last.strip()


def consume(bootstrap, topic, records):
    out = java("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic",
               topic, "--messages", records, "--group", f"bench-{os.getpid()}", "--timeout", 60000)
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, ...
    fields = out.strip().splitlines()[-1].split(",")
    return float(fields[3]), float(fields[5])


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--out", default=str(ROOT / "bench" / "reports" / "replication.md"))
    args = parser.parse_args()
    load_before = os.getloadavg()

    single_dir = tempfile.mkdtemp(prefix="skiff-bench-single-")
    single = Broker(single_dir).start()
    try:
        create(single.bootstrap, "rf1", 1)
        single_rate, single_mb, single_line = produce(single.bootstrap, "rf1", args.records, 1)
    finally:
        single.stop()

    etcd = EtcdCluster().start()
    cluster = SkiffCluster(etcd, 3)
    cluster.brokers = [cluster._broker(i, cluster.dirs[i], ("min.insync.replicas=2",)) for i in range(3)]
    cluster.start()
    try:
        agreed_controller(cluster)
        bootstrap = ",".join(b.bootstrap for b in cluster.brokers)
        create(bootstrap, "rf3", 3)
        lags, stop = [], threading.Event()

        def sample():
            while not stop.is_set():
                try:
                    for broker in cluster.brokers:
                        lags.extend(value for name, value in metrics(broker).items()
                                    if name.startswith("skiff_partition_follower_lag{"))
                except Exception:  # noqa: BLE001 - a scrape racing a start
                    pass
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        rf3_rate, rf3_mb, rf3_line = produce(bootstrap, "rf3", args.records, "all")
        stop.set()
        sampler.join()
        # Consumers read from the leaders while another acks=all load replicates.
        load = threading.Thread(target=produce, args=(bootstrap, "rf3", args.records, "all"), daemon=True)
        load.start()
        consume_mb, consume_msgs = consume(bootstrap, "rf3", args.records)
        load.join()
    finally:
        cluster.stop()
        etcd.stop()
    load_after = os.getloadavg()
    ratio = rf3_rate / single_rate
    report = f"""# Replication benchmark (issue 16)

One run, this machine ({os.cpu_count()} cores), load average {load_before[0]:.1f} before and
{load_after[0]:.1f} after. `python3 bench/scripts/replication.py --records {args.records}`; Apache Kafka's
ProducerPerformance / ConsumerPerformance (kafka-tools of tests/clients), 1 kB records, {PARTITIONS}
partitions, linger.ms 5, batch.size 64 KiB.

| run | records/s | MB/s |
|---|---|---|
| acks=1, RF 1, 1 broker | {single_rate:,.0f} | {single_mb:.1f} |
| acks=all, RF 3, 3 brokers, min.insync.replicas 2 | {rf3_rate:,.0f} | {rf3_mb:.1f} |

acks=all on RF 3 ÷ acks=1 on one broker: **{ratio:.0%}** (target ≥ 40 %).

Follower lag during the acks=all run (every led partition's `skiff_partition_follower_lag`, the
offsets its furthest-behind follower lacks, scraped from the 3 brokers every 100 ms, {len(lags)}
values):
p50 {percentile(lags, 0.5):.0f}, p99 {percentile(lags, 0.99):.0f}, max {max(lags, default=0):.0f} records; at the run's rate per partition
({rf3_rate / PARTITIONS:,.0f} records/s) the p99 is {percentile(lags, 0.99) / (rf3_rate / PARTITIONS) * 1000:.1f} ms of production.

Consumer fetch from the leaders while a second acks=all load replicates: {consume_mb:.1f} MB/s,
{consume_msgs:,.0f} records/s.

Raw lines: `{single_line}` / `{rf3_line}`
"""
    pathlib.Path(args.out).write_text(report)
    print(report)


if __name__ == "__main__":
    main()
