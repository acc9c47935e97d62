#!/usr/bin/env python3
"""Throughput spread over many partitions against few (issue 20's third target: produce and fetch
over 1,000 partitions >= 80 % of the 12-partition figures), as interleaved rounds of
`skiff-bench throughput`, each run on its own spawned broker:

    round r: --partitions SMALL, then --partitions LARGE (same bytes per pass)

and per measure (produce, Fetch v4, v2->v1, v2->v0) the LARGE/SMALL ratio of each round, their
median, min and max, as a markdown table. Figures move from run to run on a shared machine, so
only ratios of neighbouring runs are compared, and the median over rounds is the figure.

Usage: bench/scripts/partition-spread.py [--rounds 8] [--small 12] [--large 1000]
       [--pass-messages 786432] [--skiff-bench target/release/skiff-bench]
       [--skiff target/release/skiff] [--pause-pids PID,...] [--out FILE]

--pass-messages is the messages (1 kB) per pass across all partitions (786,432: about 800 MB).
--pause-pids stops those processes (SIGSTOP) for the run and resumes them after (e.g. fuzzers
sharing the machine: with two cores, one busy neighbour moves every figure).
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile

MEASURES = [("produce", "produce"), ("v4", "Fetch v4"), ("v2", "v2->v1"), ("v0", "v2->v0")]
LINE = re.compile(
    r"produce (\d+) MB/s; v4 PLAINTEXT (\d+) MB/s, v2 PLAINTEXT (\d+) MB/s, v0 PLAINTEXT (\d+) MB/s"
)


def run(args, partitions, data):
    messages = max(1, args.pass_messages // partitions)
    command = [
        args.skiff_bench, "throughput", "--skiff-bin", args.skiff, "--data", data,
        "--partitions", str(partitions), "--messages-per-partition", str(messages),
        "--chunks-kib", "128", "--no-eager", "--passes", "2", "--repeat", "1",
    ]
    subprocess.run(["sync"], check=True)
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    out = done.stdout + done.stderr
    match = LINE.search(out)
    if not match:
        sys.exit(f"no figures in the output of {' '.join(command)}:\n{out}")
    return dict(zip([key for key, _ in MEASURES], map(int, match.groups()))), command


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--small", type=int, default=12)
    parser.add_argument("--large", type=int, default=1000)
    parser.add_argument("--pass-messages", type=int, default=786432)
    parser.add_argument("--skiff-bench", default="target/release/skiff-bench")
    parser.add_argument("--skiff", default="target/release/skiff")
    parser.add_argument("--pause-pids", default="")
    parser.add_argument("--out")
    args = parser.parse_args()
    paused = [int(pid) for pid in args.pause_pids.split(",") if pid.strip()]
    for pid in paused:
        os.kill(pid, signal.SIGSTOP)
    rounds = []
    commands = []
    try:
        with tempfile.TemporaryDirectory(prefix="skiff-spread-") as scratch:
            for index in range(args.rounds):
                row = {}
                for partitions in (args.small, args.large):
                    data = os.path.join(scratch, f"r{index}-p{partitions}")
                    row[partitions], command = run(args, partitions, data)
                    commands.append(command)
                    print(f"round {index + 1} partitions {partitions}: {json.dumps(row[partitions])}",
                          file=sys.stderr)
                rounds.append(row)
    finally:
        for pid in paused:
            os.kill(pid, signal.SIGCONT)
    lines = [
        f"{args.rounds} rounds, {args.pass_messages:,} messages of 1 kB per pass, "
        f"{args.small} then {args.large} partitions per round, load average at the end "
        + " / ".join(f"{load:.2f}" for load in os.getloadavg()) + f", {os.cpu_count()} cores. "
        "Example command:",
        "",
        "```sh",
        " ".join(commands[1]) if len(commands) > 1 else "",
        "```",
        "",
        f"| measure | {args.small} partitions, median MB/s | {args.large} partitions, median MB/s "
        f"| ratio per round | median ratio | min | max |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for key, name in MEASURES:
        ratios = [row[args.large][key] / row[args.small][key] for row in rounds]
        small = statistics.median(row[args.small][key] for row in rounds)
        large = statistics.median(row[args.large][key] for row in rounds)
        lines.append(
            f"| {name} | {small:.0f} | {large:.0f} | {' '.join(f'{r:.2f}' for r in ratios)} "
            f"| {statistics.median(ratios):.2f} | {min(ratios):.2f} | {max(ratios):.2f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text)


if __name__ == "__main__":
    main()
