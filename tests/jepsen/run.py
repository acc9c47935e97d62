#!/usr/bin/env python3
"""One run: start the target (a 3-broker Skiff cluster by default, 3 Kafka 4.1.1 KRaft nodes with
--target kafka, or any bootstrap list), run the workload (the queue, or with --workload txn the
transactional one) with faults scheduled by the seed, heal, read everything, check the history and
print the table row (seed, minutes, operations, faults injected, anomaly counts).

    nice -n 10 python3 tests/jepsen/run.py --minutes 10 --seed 7 --faults kill,pause
    nice -n 10 python3 tests/jepsen/run.py --workload txn --minutes 3 --seed 7 --faults kill,pause

Exits 1 when any anomaly that Kafka's model forbids was counted (or the final read did not
complete), 0 otherwise. The history stays in --history (default: a new file under /tmp), each
broker's log beside it (HISTORY.brokerN.log).

A network-partition fault (partition-leader, partition-etcd, partition-majority) needs the network
lab (netns.py, root): the run sets it up, runs itself again inside the lab's hub namespace, and
removes the lab when that run ends."""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import checker
from checker import table_header, table_row
from faults import KINDS, NEEDS_LAB, FaultScheduler
from history import HistoryWriter
import netns
from targets import BootstrapTarget, KafkaTarget, SkiffTarget
import txn_checker
from txn_workload import CTP_SHARE, TxnWorkload
from workload import Workload

TOPIC = "jepsen-queue"
HEAL_TIMEOUT_S = 90
# Per workload: its topic, its clients, its checker, its default rate (sends per second per
# producer for the queue, transactions per second per transactional client for txn).
WORKLOADS = {
    "queue": {"topic": TOPIC, "clients": Workload, "check_file": checker.check_file, "rate": 40.0},
    "txn": {"topic": "jepsen-txn", "clients": TxnWorkload, "check_file": txn_checker.check_file, "rate": 10.0},
}


class RunResult:
    def __init__(self, report, minutes, final_read, client_errors, history_path, faults):
        self.report, self.minutes, self.final_read = report, minutes, final_read
        self.client_errors, self.history_path, self.faults = client_errors, history_path, faults

    @property
    def row(self):
        return table_row(self.report, self.minutes)

    @property
    def clean(self):
        return self.report.forbidden == 0 and self.final_read


def run_queue(target, seed, seconds, fault_kinds, history_path, **options):
    """The queue workload's run (run_workload)."""
    return run_workload(target, seed, seconds, fault_kinds, history_path, workload="queue", **options)


def run_workload(target, seed, seconds, fault_kinds, history_path, workload="queue", partitions=4,
                 fault_interval_s=10.0, **workload_options):
    """Runs `workload` for `seconds` against a target whose topic does not exist yet."""
    kind = WORKLOADS[workload]
    topic = kind["topic"]
    target.create_topic(topic, partitions)
    history = HistoryWriter(history_path, {"seed": seed, "workload": workload, "topic": topic,
                                           "partitions": partitions, "seconds": seconds,
                                           "faults": list(fault_kinds), "bootstrap": target.bootstrap})
    clients = kind["clients"](target.bootstrap, topic, partitions, history, seed,
                              client_log=f"{history_path}.clients.log", **workload_options)
    scheduler = FaultScheduler(target, history, seed, fault_kinds, topic, partitions,
                               interval_s=fault_interval_s) if fault_kinds else None
    started = time.monotonic()
    clients.start()
    if scheduler:
        scheduler.start()
    time.sleep(seconds)
    if scheduler:
        scheduler.stop()
    client_errors = clients.stop()
    target.wait_healthy(topic, HEAL_TIMEOUT_S)
    final_read = clients.final_read()
    minutes = (time.monotonic() - started) / 60
    history.close()
    report = kind["check_file"](history_path)
    return RunResult(report, minutes, final_read, client_errors, history_path,
                     scheduler.injected if scheduler else [])


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one (printed)")
    parser.add_argument("--faults", default="kill,pause",
                        help=f"comma-separated kinds of {sorted(KINDS)}, or 'none'")
    parser.add_argument("--fault-interval", type=float, default=10.0, help="mean seconds between faults")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="queue",
                        help="the queue (checker.py) or transactions (txn_checker.py)")
    parser.add_argument("--rate", type=float, default=None,
                        help="sends per second per producer (queue, default 40), transactions per second per "
                             "transactional client (txn, default 10)")
    parser.add_argument("--ctp-share", type=float, default=CTP_SHARE,
                        help=f"txn: the share of consume-transform-produce transactions (default {CTP_SHARE})")
    parser.add_argument("--target", choices=("skiff", "kafka"), default="skiff",
                        help="3 Skiff brokers with etcd, or the control: 3 Kafka 4.1.1 KRaft nodes")
    parser.add_argument("--bootstrap", help="run against this bootstrap list instead (no faults)")
    parser.add_argument("--history", help="the history file (default: a new one under /tmp)")
    parser.add_argument("--json", action="store_true", help="also print the report as JSON")
    parser.add_argument("--skiff-bin", help="the Skiff broker binary (default: SKIFF_BIN or target/release/skiff)")
    parser.add_argument("--skiff-set", action="append", default=[], metavar="KEY=VALUE",
                        help="one more broker setting, e.g. skiff.test.mutation=ack-before-hw (repeatable)")
    parser.add_argument("--lab", type=int, default=0,
                        help="the network lab's number (0-9): runs with partitions side by side need their own")
    parser.add_argument("--mutant", action="store_true",
                        help="the run is expected to show anomalies: exit 0 only when it does")
    return parser.parse_args(argv)


def in_lab(argv, number):
    """Sets up network lab `number`, runs this command again inside its hub and removes the lab."""
    lab = netns.Lab(number).setup()
    try:
        return subprocess.call(lab.hub_command([sys.executable, os.path.abspath(__file__), *argv]))
    finally:
        lab.cleanup()


def make_target(args, lab):
    if args.bootstrap:
        return BootstrapTarget(args.bootstrap)
    if args.target == "kafka":
        return KafkaTarget(lab=lab)
    return SkiffTarget(lab=lab, binary=args.skiff_bin, settings=args.skiff_set)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    kinds = [] if args.faults == "none" or args.bootstrap else args.faults.split(",")
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown:
        print(f"unknown fault kinds {unknown}: the kinds are {sorted(KINDS)}", file=sys.stderr)
        return 2
    needs_lab = any(kind in NEEDS_LAB for kind in kinds)
    if needs_lab and netns.inside() is None:
        # The seed is fixed here so that both runs use the same one.
        return in_lab([*argv, "--seed", str(seed)] if args.seed is None else argv, args.lab)
    history_path = args.history or tempfile.mkstemp(prefix=f"jepsen-{args.workload}-{seed}-", suffix=".jsonl")[1]
    print(f"target {args.bootstrap or args.target}, workload {args.workload}, seed {seed}, {args.minutes} min, "
          f"faults {kinds or 'none'}, history {history_path}", flush=True)
    target = make_target(args, netns.Lab(args.lab) if needs_lab else None)
    try:
        options = {"rate_per_s": args.rate if args.rate is not None else WORKLOADS[args.workload]["rate"]}
        if args.workload == "txn":
            options["ctp_share"] = args.ctp_share
        result = run_workload(target, seed, args.minutes * 60, kinds, history_path, workload=args.workload,
                              partitions=args.partitions, fault_interval_s=args.fault_interval, **options)
    finally:
        target.save_logs(history_path)
        target.stop()
    print(table_header(result.report.classes))
    print(result.row)
    print(f"faults: {result.faults}")
    print(f"final read complete: {result.final_read}; figures: {dict(result.report.figures)}")
    for name, examples in result.report.examples.items():
        print(f"{name}: {examples}")
    if result.client_errors:
        print(f"client errors: {result.client_errors}")
    if args.json:
        print(json.dumps(result.report.as_dict(), default=str))
    if args.mutant:
        return 0 if result.report.forbidden > 0 else 1
    return 0 if result.clean else 1


if __name__ == "__main__":
    sys.exit(main())
