"""Renders bench/reports/cpu-per-gb.md from `skiff-bench cpu` samples of several brokers
(bench/scripts/cpu-per-gb.sh): each path's median CPU s/GB per broker, Skiff's ratio to each
peer and to its floors, and the issue's target per path, all from one run. A name `<broker>-cluster`
holds that broker's cluster rounds (the replicated paths) and fills the same column."""

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
    return {path: (statistics.median(values), min(values), max(values), len(values))
            for path, values in by_path.items()}


def floors_of(path):
    """The floors a path is held against, summed (skiff-bench cpu's pairing, `floors_of`)."""
    produce, sendfile = "floor: receive", "floor: sendfile"
    if path.startswith("produce") and "100 B" in path:
        return ["floor: the same, 100 B records"]
    if path.startswith("replication's added cost"):
        return [produce, sendfile]
    if path.startswith("the leader's added cost"):
        return [sendfile]
    if path.startswith("follower replication"):
        return [produce]
    if path.startswith("produce acks=all"):
        return []
    if path.startswith("produce"):
        return [produce]
    if path.startswith("modern fetch") and path.endswith("over TLS"):
        return ["floor: read, seal"]
    if path.startswith("modern fetch"):
        return [sendfile]
    if path.startswith("legacy fetch"):
        return ["floor: read, CRC32"]
    return []


# Where Kafka itself is within this much of the floor, halving it is out of reach and the floor
# target alone applies: at most FLOOR_ONLY_BOUND times the floor.
PEER_NEAR_FLOOR = 2.2
FLOOR_ONLY_BOUND = 1.1


def target(path, to_peer, to_floor, peer_to_floor):
    """Issue 41's target for the path, and whether Skiff's medians meet it."""
    def verdict(value, bound):
        return "—" if value is None else ("met" if value <= bound else "missed")
    if path.startswith("replication's added cost"):
        return f"≤ 1.5× floors: {verdict(to_floor, 1.5)}"
    if path.startswith("modern fetch") and path.endswith("over TLS"):
        return f"≤ 1.25× TLS floor: {verdict(to_floor, 1.25)}; ≤ ½ Kafka: {verdict(to_peer, 0.5)}"
    if not path.startswith(("produce", "modern fetch", "legacy fetch", "follower replication")):
        return ""
    if peer_to_floor is not None and peer_to_floor <= PEER_NEAR_FLOOR:
        return (f"Kafka at {peer_to_floor:.2f}× its floor: ≤ {FLOOR_ONLY_BOUND}× floor: "
                f"{verdict(to_floor, FLOOR_ONLY_BOUND)} (≤ ½ Kafka: {verdict(to_peer, 0.5)})")
    return f"≤ ½ Kafka: {verdict(to_peer, 0.5)}"


def to_floors(figures, broker, path):
    """The broker's median on the path over the sum of its floors' medians, or None."""
    own = figures.get(broker, {}).get(path)
    floor_medians = [next((figure[0] for name, figure in figures.get(broker, {}).items()
                           if name.startswith(prefix)), None) for prefix in floors_of(path)]
    if own is None or not floor_medians or None in floor_medians or sum(floor_medians) <= 0:
        return None
    return own[0] / sum(floor_medians)


def cell(figure):
    return "—" if figure is None else f"{figure[0]:.2f} ({figure[1]:.2f}–{figure[2]:.2f})"


def main(data, report, names):
    data = pathlib.Path(data)
    figures, loads, negotiated = {}, {}, {}
    for name in names:
        column = name.removesuffix("-cluster")
        samples = []
        for path in sorted(data.glob(f"{name}.r*.json")):
            samples += json.loads(path.read_text())
        if not samples:
            continue
        figures.setdefault(column, []).extend(samples)
        uptime = data / f"{name}.uptime"
        if uptime.exists():
            loads[name] = [line.split("load average:")[-1].strip() for line in uptime.read_text().splitlines()]
        for log in sorted(data.glob(f"{name}.r*.log")):
            for line in log.read_text().splitlines():
                if line.startswith("tls negotiated"):
                    negotiated.setdefault(column, set()).add(line)
    figures = {column: medians(samples) for column, samples in figures.items()}
    paths = []
    for broker_figures in figures.values():
        paths += [path for path in broker_figures if path not in paths]
    peers = [broker for broker in figures if broker != "skiff"]
    run = (data / "run.txt").read_text().strip().splitlines() if (data / "run.txt").exists() else []
    lines = ["# Broker CPU per GB: Skiff, Apache Kafka, and floors (issue 41)", "",
             "`bench/scripts/cpu-per-gb.sh` (skiff-bench cpu against each broker, and each cluster, in "
             "rounds that alternate between them; figures are CPU seconds per 10^9 bytes moved, median of "
             "the rounds with their range; the floors are measured again in every round). Replicated "
             "paths: per GB produced, or per GB replicated (bytes produced × followers) where the name "
             "says so. Compare only within one run.", "",
             *(f"- {line}" for line in run), "",
             "| " + " | ".join(["path", *figures, *(f"Skiff ÷ {p}" for p in peers), "Skiff ÷ its floors",
                               "target (Skiff)"]) + " |",
             "|---|" + "---|" * (len(figures) + len(peers) + 2)]
    for path in paths:
        cells = [cell(figures[broker].get(path)) for broker in figures]
        skiff = figures.get("skiff", {}).get(path)
        ratios = {}
        for peer in peers:
            other = figures[peer].get(path)
            ratios[peer] = None if skiff is None or other is None or other[0] <= 0 else skiff[0] / other[0]
            cells.append("—" if ratios[peer] is None else f"{ratios[peer]:.2f}")
        to_floor = to_floors(figures, "skiff", path)
        cells.append("—" if to_floor is None else f"{to_floor:.2f}")
        peer = "kafka-3.9.1" if path.startswith("legacy") else "kafka-4.1.1"
        cells.append(target(path, ratios.get(peer), to_floor, to_floors(figures, peer, path)))
        lines.append(f"| {path} | " + " | ".join(cells) + " |")
    lines += ["", "Load average (1, 5, 15 min) before and after each invocation:", ""]
    for name, values in loads.items():
        lines.append(f"- {name}: " + "; ".join(" / ".join(values[i:i + 2]) for i in range(0, len(values), 2)))
    if negotiated:
        lines += ["", "TLS as negotiated (the broker's listener with the bench's rustls client; the floor, "
                  "rustls on both ends):", ""]
        for column, found in negotiated.items():
            lines += [f"- {column}: {line}" for line in sorted(found)]
    pathlib.Path(report).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
