"""Renders bench/reports/cpu-per-gb.md from `skiff-bench cpu` samples of several brokers
(bench/scripts/cpu-per-gb.sh): each path's median CPU s/GB per broker, Skiff's ratio to each
peer and to the floor, all from one run."""

import json
import pathlib
import statistics
import sys


def medians(samples):
    by_path = {}
    for sample in samples:
        gb = max(sample["bytes"] / 1e9, 1e-12)
        cpu = sample["cpu"]["user_s"] + sample["cpu"]["system_s"]
        by_path.setdefault(sample["path"], []).append(cpu / gb)
    return {path: (statistics.median(values), min(values), max(values)) for path, values in by_path.items()}


def main(data, report, brokers):
    data = pathlib.Path(data)
    figures = {}
    for broker in brokers:
        path = data / f"{broker}.json"
        if path.exists():
            figures[broker] = medians(json.loads(path.read_text()))
    paths = []
    for broker_figures in figures.values():
        paths += [path for path in broker_figures if path not in paths]
    peers = [broker for broker in figures if broker != "skiff"]
    lines = ["# Broker CPU per GB: Skiff, Apache Kafka, and floors (issue 41)", "",
             "`bench/scripts/cpu-per-gb.sh` (skiff-bench cpu against each broker in turn, in one run; "
             "figures are CPU seconds per 10^9 bytes moved, median of the rounds with their range; "
             "the floors are measured again in every broker's rounds). Compare only within one run.", "",
             "| " + " | ".join(["path", *figures, *(f"Skiff ÷ {p}" for p in peers), "Skiff ÷ its floor"]) + " |",
             "|---|" + "---|" * (len(figures) + len(peers) + 1)]
    def floor_of(path):
        """The floor a path is held against (skiff-bench cpu's pairing)."""
        if path.startswith("produce") and "100 B" in path:
            return "floor: the same, 100 B records"
        if path.startswith("produce"):
            return "floor: receive"
        if path.startswith("modern fetch") and path.endswith("over TLS"):
            return "floor: read, seal"
        if path.startswith("modern fetch"):
            return "floor: sendfile"
        if path.startswith("legacy fetch"):
            return "floor: read, CRC32"
        return None
    for path in paths:
        cells = []
        for broker in figures:
            figure = figures[broker].get(path)
            cells.append("—" if figure is None else f"{figure[0]:.2f} ({figure[1]:.2f}–{figure[2]:.2f})")
        skiff = figures.get("skiff", {}).get(path)
        for peer in peers:
            other = figures[peer].get(path)
            cells.append("—" if skiff is None or other is None or other[0] == 0 else f"{skiff[0] / other[0]:.2f}")
        prefix = floor_of(path)
        floor = next((figure for name, figure in figures.get("skiff", {}).items()
                      if prefix and name.startswith(prefix)), None)
        cells.append("—" if skiff is None or floor is None or floor[0] == 0 else f"{skiff[0] / floor[0]:.2f}")
        lines.append(f"| {path} | " + " | ".join(cells) + " |")
    for broker in figures:
        uptime = data / f"{broker}.uptime"
        if uptime.exists():
            lines += ["", f"{broker}: load before and after: " + " / ".join(
                line.split("load average:")[-1].strip() for line in uptime.read_text().splitlines())]
    pathlib.Path(report).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
