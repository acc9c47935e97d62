#!/usr/bin/env python3
"""Transactions against Apache Kafka 4.1.1 (issue 38, "Performance"), in one run.

Starts Skiff's release broker and Apache Kafka 4.1.1 (single-node KRaft, the jars
bench/scripts/peers.sh fetches with mvn; brokers started as bench/scripts/compaction.py starts
them) one after the other on 127.0.0.1, runs the same phases against each with Kafka 4.1.1's Java
client (bench/scripts/transactions/TxnPerf.java, compiled with javac against Kafka's jars), and
prints the ratio table; the raw figures go to OUT/results.json.

Phases per broker (a fresh broker on a fresh data directory for each broker):
  idempotent     --records records of --record-bytes on --partitions partitions, acks=all,
                 enable.idempotence, batch.size --batch-bytes and linger.ms --linger-ms;
  transactional  the same load and producer settings with a transactional.id, every
                 --txn-records records one transaction (begin, send, commit); none aborted;
  read_uncommitted, read_committed
                 a consumer reads the transactional topic (no aborts) from its start to the end
                 offsets of its isolation level (the last stable offset for read_committed),
                 --read-passes times each in alternating order; the fastest pass of each counts.
MB/s is the client's (records x record bytes over its own send-to-last-ack or first-poll-to-end
time); broker CPU is the broker process's user+system time from /proc/<pid>/stat over the phase,
per GB of record values. A phase a broker refuses (Skiff before transactions land) is reported
with its error and the run goes on.

Usage: bench/scripts/transactions.py [--brokers skiff,kafka] [--records 200000 ...]   (see --help)
Needs: the release skiff (SKIFF_BIN, else target/release/skiff; build it with
`cargo build --release -p skiff-broker --features etcd`), java 17 and javac, mvn with Kafka's jars
reachable (or already in --work), python3 with confluent-kafka.
"""
import argparse
import json
import os
import re
import subprocess
import sys

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compaction  # noqa: E402  (Broker, install_kafka, process_figures, log: one place for each)

HERE = os.path.dirname(os.path.abspath(__file__))
GB = 1 << 30
MB = 1 << 20
RESULT = re.compile(r"RESULT records=(\d+) bytes=(\d+) seconds=([\d.]+)")
# Each client phase is bounded: a broker that stops answering fails the phase, never the run.
PHASE_TIMEOUT_S = 900
PHASES = ("idempotent", "transactional", "read_uncommitted", "read_committed")
ISOLATIONS = ("read_uncommitted", "read_committed")
# The targets, shown beside the measured ratios.
TARGETS = {"transactional / idempotent": "≥ 0.8", "read_committed / read_uncommitted": "≥ 0.95",
           "transactional Skiff / Kafka": "≥ 2"}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", default="skiff,kafka", help="comma-separated: skiff, kafka")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-bytes", type=int, default=1000)
    parser.add_argument("--txn-records", type=int, default=100, help="records per transaction")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch-bytes", type=int, default=65536, help="batch.size of both producers")
    parser.add_argument("--linger-ms", type=int, default=5, help="linger.ms of both producers")
    parser.add_argument("--read-passes", type=int, default=3, help="reads per isolation level (the fastest kept)")
    parser.add_argument("--work", default="/tmp/skiff-peers", help="Kafka's jars (installed if missing)")
    parser.add_argument("--out", default="/tmp/skiff-bench-transactions", help="broker state and results.json")
    return parser.parse_args()


def compile_client(libs, out_dir):
    classes = os.path.join(out_dir, "classes")
    os.makedirs(classes, exist_ok=True)
    subprocess.run(["javac", "-d", classes, "-cp", os.path.join(libs, "*"),
                    os.path.join(HERE, "transactions", "TxnPerf.java")], check=True)
    return f"{classes}:{os.path.join(libs, '*')}"


def run_client(classpath, *args):
    """One TxnPerf run: {records, bytes, seconds} or {error}."""
    try:
        result = subprocess.run(["java", "-Xmx1g", "-cp", classpath, "TxnPerf", *map(str, args)],
                                capture_output=True, text=True, timeout=PHASE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {PHASE_TIMEOUT_S} s"}
    match = RESULT.search(result.stdout)
    if result.returncode != 0 or not match:
        lines = [line for line in result.stderr.splitlines() if "Exception" in line] or result.stderr.splitlines()
        # The exception's simple name and message: "TimeoutException: ... awaiting InitProducerId".
        first = (lines or ["no output"])[0].strip().replace('Exception in thread "main" ', "")
        return {"error": re.sub(r"^([\w$]+\.)+", "", first)[:200]}
    return {"records": int(match.group(1)), "bytes": int(match.group(2)), "seconds": float(match.group(3))}


def cpu_seconds(pid):
    return compaction.process_figures(pid)["cpu"]


def measured(broker, classpath, args):
    """Runs `args` against `broker`; adds MB/s and the broker's CPU seconds per GB."""
    before = cpu_seconds(broker.pid)
    figures = run_client(classpath, *args)
    cpu = cpu_seconds(broker.pid) - before
    if "error" not in figures:
        figures["mb_per_s"] = figures["bytes"] / MB / figures["seconds"]
        figures["cpu_seconds"] = cpu
        figures["cpu_seconds_per_gb"] = cpu / (figures["bytes"] / GB) if figures["bytes"] else None
    return figures


def create_topics(bootstrap, partitions, names):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1) for name in names]).values():
        future.result(60)


def run_broker(kind, args, classpath):
    """Every phase against a fresh `kind` broker: {phase: figures}."""
    broker = compaction.Broker(kind, os.path.join(args.out, kind), {}, args.work)
    try:
        bootstrap = broker.bootstrap
        create_topics(bootstrap, args.partitions, ["bench-idempotent", "bench-transactional"])
        common = [args.records, args.record_bytes, args.batch_bytes, args.linger_ms]
        results = {}
        compaction.log(f"{kind}: idempotent produce")
        results["idempotent"] = measured(broker, classpath, ["produce", "idempotent", bootstrap, "bench-idempotent",
                                                             *common])
        compaction.log(f"{kind}: transactional produce")
        results["transactional"] = measured(broker, classpath, ["produce", "transactional", bootstrap,
                                                                "bench-transactional", *common, args.txn_records,
                                                                f"bench-{kind}-{os.getpid()}"])
        read_topic = "bench-transactional" if "error" not in results["transactional"] else "bench-idempotent"
        results.update(reads(broker, classpath, read_topic, args.read_passes))
        return results
    finally:
        broker.stop()


def reads(broker, classpath, topic, passes):
    """Both isolation levels, `passes` times in alternating order (a warm-up or a neighbour's burst
    does not always fall on the same one); the fastest pass of each."""
    best = {}
    for index in range(passes):
        order = ISOLATIONS if index % 2 == 0 else ISOLATIONS[::-1]
        for isolation in order:
            compaction.log(f"{broker.kind}: {isolation} fetch of {topic}, pass {index + 1}")
            figures = measured(broker, classpath, ["consume", isolation, broker.bootstrap, topic])
            figures.update(topic=topic, passes=passes)
            kept = best.get(isolation)
            if kept is None or figures.get("mb_per_s", 0) > kept.get("mb_per_s", 0):
                best[isolation] = figures
    return best


def ratio(a, b, key="mb_per_s"):
    if a is None or b is None or key not in a or key not in b or not b[key]:
        return None
    return a[key] / b[key]


def cell(figures, key, digits):
    if figures is None:
        return "–"
    if "error" in figures:
        return f"error: {figures['error'][:90]}"
    value = figures.get(key)
    return "–" if value is None else f"{value:.{digits}f}"


def number(value, digits=2):
    return "–" if value is None else f"{value:.{digits}f}"


def table(results, args):
    """The report: MB/s and CPU per GB per phase and broker, then the ratios."""
    skiff, kafka = results.get("skiff", {}), results.get("kafka", {})
    lines = [f"{args.records} records of {args.record_bytes} B on {args.partitions} partitions, batch.size "
             f"{args.batch_bytes}, linger.ms {args.linger_ms}, transactions of {args.txn_records} records, "
             f"Kafka 4.1.1's Java client; reads: the fastest of {args.read_passes} passes", "",
             "| phase | Skiff MB/s | Kafka 4.1.1 MB/s | Skiff / Kafka | Skiff CPU s/GB | Kafka CPU s/GB |",
             "|---|---|---|---|---|---|"]
    for phase in PHASES:
        s, k = skiff.get(phase), kafka.get(phase)
        lines.append(f"| {phase} | {cell(s, 'mb_per_s', 1)} | {cell(k, 'mb_per_s', 1)} | {number(ratio(s, k))} | "
                     f"{cell(s, 'cpu_seconds_per_gb', 2)} | {cell(k, 'cpu_seconds_per_gb', 2)} |")
    lines += ["", "| ratio | Skiff | Kafka 4.1.1 | target (Skiff) |", "|---|---|---|---|"]
    for name, (a, b) in (("transactional / idempotent", ("transactional", "idempotent")),
                         ("read_committed / read_uncommitted", ("read_committed", "read_uncommitted"))):
        lines.append(f"| {name} | {number(ratio(skiff.get(a), skiff.get(b)))} | "
                     f"{number(ratio(kafka.get(a), kafka.get(b)))} | {TARGETS[name]} |")
    lines.append(f"| transactional Skiff / Kafka | {number(ratio(skiff.get('transactional'), kafka.get('transactional')))}"
                 f" | | {TARGETS['transactional Skiff / Kafka']} |")
    return "\n".join(lines)


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    libs = compaction.install_kafka(args.work)
    classpath = compile_client(libs, args.out)
    results = {"args": vars(args), "load_before": os.getloadavg()}
    for kind in args.brokers.split(","):
        results[kind] = run_broker(kind, args, classpath)
    results["load_after"] = os.getloadavg()
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(table(results, args))
    print(f"\nload average before {results['load_before'][0]:.1f}, after {results['load_after'][0]:.1f}; "
          f"raw figures in {os.path.join(args.out, 'results.json')}")


if __name__ == "__main__":
    main()
