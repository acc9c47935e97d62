#!/usr/bin/env python3
"""Interleaved throughput rounds of two skiff binaries, for "behaviour and speed unchanged" checks.

Usage: bench/scripts/before-after.py BEFORE_SKIFF AFTER_SKIFF [--rounds 7] [--bench SKIFF_BENCH]

Each round runs `skiff-bench throughput` (12 partitions x 1 kB, 128 KiB chunks, 3 passes) three
times with one client binary: twice against BEFORE and once against AFTER, AFTER second in odd
rounds and last in even ones. It prints every run, then per path (produce, Fetch v4, v2->v1,
v2->v0) the median and range of AFTER / mean(BEFORE) and of BEFORE / BEFORE (the second before
run over the first): the change is within noise when the first median lies in the second range.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINE = re.compile(r"produce (\d+) MB/s; v4 PLAINTEXT (\d+) MB/s, v2 PLAINTEXT (\d+) MB/s, "
                  r"v0 PLAINTEXT (\d+) MB/s")
PATHS = ["produce", "Fetch v4", "v2->v1", "v2->v0"]


def run(bench, skiff):
    with tempfile.TemporaryDirectory() as data:
        out = subprocess.run(
            [bench, "throughput", "--skiff-bin", skiff, "--data", data,
             "--messages-per-partition", "32768", "--chunks-kib", "128", "--no-eager",
             "--passes", "3", "--repeat", "1"],
            capture_output=True, text=True, check=True)
    match = LINE.search(out.stdout + out.stderr)
    if not match:
        sys.exit(f"no throughput line from {skiff}:\n{out.stdout}{out.stderr}")
    return [int(g) for g in match.groups()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--bench", default=os.path.join(ROOT, "target/release/skiff-bench"))
    args = parser.parse_args()
    after_ratios = [[] for _ in PATHS]
    before_ratios = [[] for _ in PATHS]
    for r in range(1, args.rounds + 1):
        order = ["before", "after", "before"] if r % 2 else ["before", "before", "after"]
        runs = []
        for who in order:
            figures = run(args.bench, getattr(args, who))
            print(f"round {r} {who}: " + ", ".join(f"{p} {v} MB/s" for p, v in zip(PATHS, figures)))
            runs.append((who, figures))
        befores = [f for who, f in runs if who == "before"]
        after = next(f for who, f in runs if who == "after")
        for k in range(len(PATHS)):
            after_ratios[k].append(after[k] / statistics.mean(b[k] for b in befores))
            before_ratios[k].append(befores[1][k] / befores[0][k])
    print(f"\n| path | after / before (median, range) | before / before (median, range) | within |")
    print("|---|---|---|---|")
    for k, path in enumerate(PATHS):
        a, b = after_ratios[k], before_ratios[k]
        within = min(b) <= statistics.median(a) <= max(b)
        print(f"| {path} | {statistics.median(a):.3f} ({min(a):.3f}-{max(a):.3f}) | "
              f"{statistics.median(b):.3f} ({min(b):.3f}-{max(b):.3f}) | "
              f"{'yes' if within else 'NO'} |")


if __name__ == "__main__":
    main()
