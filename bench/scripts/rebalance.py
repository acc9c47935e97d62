#!/usr/bin/env python3
"""Rebalance time against Apache Kafka 4.1.1 (issue 40, "Performance"), in one run.

Starts Skiff's release broker and Apache Kafka 4.1.1 (single-node KRaft, the jars
bench/scripts/peers.sh fetches with mvn; both started as bench/scripts/compaction.py starts them)
side by side on 127.0.0.1, each with the same group.consumer.heartbeat.interval.ms, and a topic of
--partitions partitions on each. For every group size and protocol it runs
bench/scripts/rebalance/RebalancePerf.java (Kafka 4.1.1's Java client) against both brokers, the
broker that goes first alternating: a group of that many members consumes while a producer sends
--rate records a second over every partition; each round a new member joins, and the round's time
is from its start to the group consuming every partition again (each partition owned once and
delivering to its owner since the owner got it), beside the other members' longest gap between
two records in the round. The table shows the median over the rounds and its spread.

Protocols: eager (classic, RangeAssignor), cooperative (classic, CooperativeStickyAssignor),
consumer (KIP-848, the broker's default assignor). A protocol a broker refuses is reported with
its error and the run goes on.

Usage: bench/scripts/rebalance.py [--sizes 10,100] [--partitions 1000] [--rounds 5] ...  (--help)
Needs: the release skiff (SKIFF_BIN, else target/release/skiff), java 17 and javac, mvn with Kafka's
jars reachable (or already in --work), python3 with confluent-kafka.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compaction  # noqa: E402  (Broker, install_kafka, log: one place for each)

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOCOLS = ("eager", "cooperative", "consumer")
TOPIC = "bench-rebalance"
# A group that does not finish its rounds by then is reported as failed, never waited on forever.
CLIENT_TIMEOUT_S = 1800


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", default="skiff,kafka", help="comma-separated: skiff, kafka")
    parser.add_argument("--sizes", default="10,100", help="group sizes (members before a round)")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--heartbeat-ms", type=int, default=1000,
                        help="group.consumer.heartbeat.interval.ms of both brokers, the classic "
                             "consumers' heartbeat.interval.ms")
    parser.add_argument("--rate", type=int, default=10000, help="records a second over all partitions")
    parser.add_argument("--work", default="/tmp/skiff-peers", help="Kafka's jars (installed if missing)")
    parser.add_argument("--out", default="/tmp/skiff-bench-rebalance", help="broker state and results.json")
    parser.add_argument("--report", help="also write the table to this Markdown file")
    return parser.parse_args()


def broker_settings(heartbeat_ms):
    """The same group settings on both brokers: the heartbeat interval, its lower bound at it."""
    return {"group.consumer.heartbeat.interval.ms": heartbeat_ms,
            "group.consumer.min.heartbeat.interval.ms": heartbeat_ms,
            "group.initial.rebalance.delay.ms": 0}


def compile_client(libs, out_dir):
    classes = os.path.join(out_dir, "classes")
    os.makedirs(classes, exist_ok=True)
    subprocess.run(["javac", "-d", classes, "-cp", os.path.join(libs, "*"),
                    os.path.join(HERE, "rebalance", "RebalancePerf.java")], check=True)
    return f"{classes}:{os.path.join(libs, '*')}"


def create_topic(bootstrap, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        future.result(120)


def run_client(classpath, broker, size, protocol, args):
    """One RebalancePerf run: {formed_ms, rounds: [...]} or {error}."""
    command = ["java", "-Xmx2g", "-cp", classpath, "RebalancePerf", broker.bootstrap, TOPIC,
               str(args.partitions), str(size), protocol, str(args.rounds), str(args.heartbeat_ms),
               str(args.rate)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {CLIENT_TIMEOUT_S} s"}
    figures = {"rounds": []}
    # Only the program's own lines: the client's logging may share its standard output.
    for line in result.stdout.splitlines():
        if not line.startswith('{"event"'):
            continue
        event = json.loads(line)
        if event["event"] == "formed":
            figures["formed_ms"] = event["ms"]
        else:
            figures["rounds"].append(event)
    timed_out = [r for r in figures["rounds"] if r["join_ms"] < 0 or r["leave_ms"] < 0]
    if result.returncode != 0 or not figures["rounds"] or timed_out:
        errors = [line for line in result.stderr.splitlines() if "Exception" in line or "member" in line]
        figures["error"] = (errors or [f"exit {result.returncode}, {len(figures['rounds'])} rounds"])[0][:200]
    return figures


def summary(figures):
    joins = [r["join_ms"] for r in figures.get("rounds", []) if r["join_ms"] >= 0]
    gaps = [r["longest_gap_ms"] for r in figures.get("rounds", []) if r["join_ms"] >= 0]
    if not joins:
        return None
    return {"join_median_ms": statistics.median(joins), "join_min_ms": min(joins),
            "join_max_ms": max(joins), "gap_median_ms": statistics.median(gaps), "gap_max_ms": max(gaps)}


def measure(brokers, classpath, args):
    results = {}
    order = list(brokers)
    for size in [int(s) for s in args.sizes.split(",")]:
        for protocol in args.protocols.split(","):
            for kind in order:
                compaction.log(f"{kind}: {size} members, {protocol}")
                figures = run_client(classpath, brokers[kind], size, protocol, args)
                figures["summary"] = summary(figures)
                results.setdefault(f"{size}/{protocol}", {})[kind] = figures
            order.reverse()
    return results


def cell(figures, key):
    if figures is None:
        return "–"
    found = figures.get("summary")
    if found is None:
        return f"error: {figures.get('error', '?')[:80]}"
    return f"{found[key]:.0f}"


def spread(figures):
    found = (figures or {}).get("summary")
    return "–" if found is None else f"{found['join_min_ms']:.0f}–{found['join_max_ms']:.0f}"


def table(results, args):
    lines = [f"{args.partitions} partitions, {args.rate} records/s of 100 B, heartbeat interval "
             f"{args.heartbeat_ms} ms on both brokers, {args.rounds} rounds per row (median, min–max); "
             "Kafka 4.1.1's Java client", "",
             "| members | protocol | Skiff join ms | Kafka join ms | Skiff ÷ Kafka | Skiff spread | "
             "Kafka spread | Skiff longest gap ms | Kafka longest gap ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, by_broker in results.items():
        size, protocol = key.split("/")
        s, k = by_broker.get("skiff"), by_broker.get("kafka")
        ratio = "–"
        if s and k and s.get("summary") and k.get("summary"):
            ratio = f"{s['summary']['join_median_ms'] / k['summary']['join_median_ms']:.2f}"
        lines.append(f"| {size} | {protocol} | {cell(s, 'join_median_ms')} | {cell(k, 'join_median_ms')} | "
                     f"{ratio} | {spread(s)} | {spread(k)} | {cell(s, 'gap_max_ms')} | {cell(k, 'gap_max_ms')} |")
    return "\n".join(lines)


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    libs = compaction.install_kafka(args.work)
    classpath = compile_client(libs, args.out)
    settings = broker_settings(args.heartbeat_ms)
    brokers = {}
    try:
        for kind in args.brokers.split(","):
            brokers[kind] = compaction.Broker(kind, os.path.join(args.out, kind), settings, args.work)
            create_topic(brokers[kind].bootstrap, args.partitions)
        results = measure(brokers, classpath, args)
    finally:
        for broker in brokers.values():
            broker.stop()
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"args": vars(args), "results": results, "load": os.getloadavg()}, f, indent=1)
    report = table(results, args)
    print(report)
    if args.report:
        with open(args.report, "w") as f:
            f.write(report + "\n")


if __name__ == "__main__":
    main()
