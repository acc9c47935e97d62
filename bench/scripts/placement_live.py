#!/usr/bin/env python3
"""The live placement measurement of issue 17 (docs/design/placement.md §3.3b, "Live cluster"): 5 brokers on
loopback over 3 etcd members, topics laid out so that 2 brokers lead 70 % of the bytes in, steady
idempotent acks=all producers, and the controller's shedder left to work for a number of cycles.
Measured from the cluster's own records (etcd) and the clients:
- bytes in per broker over time (each broker's load report, `R/load/<id>`: bytes in from
  clients plus replication bytes in, as the shedder weighs it), with the cycles and moves marked;
- every bundle move (the bundle records `R/bundles/...` and their move history);
- max/mean bytes in per broker at the end of cycle 5 (target ≤ 1.25);
- the moves against the minimal number of bundle moves that reaches max/mean ≤ 1.25 from the
  starting per-bundle loads (exact branch-and-bound search; target ≤ 1.2×);
- ping-pong moves (target 0);
- every error the clients saw, by name (target: only the retriable "where is the leader" codes);
- acknowledged records missing when every partition is read back from its final leader (target 0).

Needs a release broker with etcd support (`cargo build --release -p skiff-broker --features etcd`;
another build: `--broker-bin` or SKIFF_BIN), etcd and etcdctl on PATH, and confluent-kafka.
    python3 bench/scripts/placement_live.py [--out bench/reports/placement-live.md] [--shed-interval-ms 10000]
                                    [--cycles 8] [--duration-s S] [--total-kib-s 2048]
    python3 bench/scripts/placement_live.py --self-test     (the pure parts: minimal moves, layout, ping-pong)
    python3 bench/scripts/placement_live.py --render bench/reports/data/placement-live.json   (the report again)
Besides the report and its SVG it writes the run's data (`data/<report>.json` beside the report:
every sample, cycle, move and client count) and keeps the brokers' logs (--logs-dir, else a
temporary directory).
Exits 2, with a message naming the cause, if no broker ever reports traffic (the shedder would
see nothing to move, so there is nothing to measure).
"""

import argparse
import base64
import collections
import html
import itertools
import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "clients"))

import conftest  # noqa: E402
from etcd_cluster import EtcdCluster  # noqa: E402
from test_cluster import ANSI, METRICS, SESSION_MS, SkiffCluster, agreed_controller, wait_for  # noqa: E402

BROKERS = 5
# The two brokers that start with 70 % of the bytes in; the other three share the rest equally.
HEAVY_BROKERS = (0, 1)
HEAVY_SHARE = 0.70
TOPICS = 10
PARTITIONS = 4
# Skiff's controller gives each topic (its own bundle namespace) 4 bundle records over equal
# quarters of the CRC32 space of "<topic>-<partition>" (placement NAMESPACE_BUNDLES_DEFAULT).
BUNDLES_PER_TOPIC = 4
HASH_SPACE = 1 << 32
RECORD_BYTES = 1024
# Relative bytes-in rates of the topics (largest first): bundles of 9 different sizes, so the
# minimal-moves search has real choices to make.
TOPIC_WEIGHTS = (8, 7, 6, 5, 4, 3, 2, 2, 2, 1)
# The leader (sole replica) of every partition of each topic. Whole topics, so that the layout can
# also be made where CreateTopics takes no replica assignment (one broker running at a time).
# Of the 40 weight units broker 0 leads 8 + 6 = 14, broker 1 7 + 5 + 2 = 14 (together 70 %),
# broker 2 4, broker 3 3 + 1 = 4, broker 4 2 + 2 = 4 (10 % each).
TOPIC_LEADERS = (0, 1, 0, 1, 2, 3, 1, 4, 4, 3)
BALANCE_TARGET = 1.25  # max/mean bytes in per broker
MOVES_FACTOR_TARGET = 1.2  # moves made ÷ minimal moves
TARGET_CYCLE = 5
SAMPLE_S = 2.0
COOLDOWN_MS = 600_000
# Kafka's name for code 6 (librdkafka still says NOT_LEADER_FOR_PARTITION).
KAFKA_NAMES = {"NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER"}
# What a client may see while a leadership moves (docs/design/cluster.md §5.6): the old leader answers
# NOT_LEADER_OR_FOLLOWER, and a broker that has not yet learnt the new leader may answer
# LEADER_NOT_AVAILABLE; the client refreshes its metadata and retries both by itself.
ALLOWED_ERRORS = {"NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE"}
# Bounded waits.
READY_TIMEOUT_S = 30
LAYOUT_TIMEOUT_S = 30
# A broker writes its report at least every 60 s (more often when a figure moves > 10 %).
LOAD_TIMEOUT_S = 75
FLUSH_TIMEOUT_S = 60
READ_BACK_TIMEOUT_S = 120
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


# --------------------------------------------------------------------------------------------
# Pure parts (checked by --self-test)

def bundle_index(topic, partition):
    """Which of the topic's default bundles holds the partition (bundles.rs: CRC32 of
    "<topic>-<partition>", equal ranges of the hash space)."""
    step = HASH_SPACE // BUNDLES_PER_TOPIC
    return min(zlib.crc32(f"{topic}-{partition}".encode()) // step, BUNDLES_PER_TOPIC - 1)


def bundle_name(topic, index):
    """The bundle's name as the records and the endpoint write it: `<ns>/0xLO_0xHI`."""
    step = HASH_SPACE // BUNDLES_PER_TOPIC
    lo = index * step
    hi = HASH_SPACE if index == BUNDLES_PER_TOPIC - 1 else (index + 1) * step
    return f"{topic}/0x{lo:08x}_0x{min(hi, HASH_SPACE - 1):08x}"


def topic_names(count=TOPICS, partitions=PARTITIONS):
    """Topic names whose partitions each hash into a bundle of their own, so a bundle is one
    partition: its load is that partition's rate and it has a single preferred leader."""
    names = []
    for index in range(count):
        for suffix in itertools.count():
            name = f"live{index}-{suffix}"
            if len({bundle_index(name, p) for p in range(partitions)}) == partitions:
                names.append(name)
                break
    return names


def layout(names):
    """{(topic, partition): its leader at the start}, from TOPIC_LEADERS."""
    return {(topic, p): leader for topic, leader in zip(names, TOPIC_LEADERS) for p in range(PARTITIONS)}


def minimal_moves(loads, owners, brokers, ratio=BALANCE_TARGET, node_budget=5_000_000):
    """The smallest number of bundles that must change owner so that max/mean load per broker is
    ≤ `ratio` (the mean is over `brokers`, fixed: moves do not change the total). `loads` and
    `owners` are parallel lists. Exact: iterative deepening on the move count k with a
    depth-first search over the bundles, largest first, each kept or given to a broker with
    room; a branch is cut when its moves plus a lower bound of the moves still needed exceed k
    (for each broker, the fewest of its undecided bundles, largest first, whose leaving brings it
    under the cap). Identical bundles of one owner are taken in a fixed order (a moved one is
    never followed by a kept one, targets non-decreasing) so their permutations are not
    searched again.
    Returns (k, [(bundle index, from, to)]), or (None, None) if no assignment can reach the
    ratio (a single bundle above the cap) or the search exceeds `node_budget` nodes."""
    brokers = list(brokers)
    total = sum(loads)
    if total <= 0:
        return 0, []
    cap = ratio * total / len(brokers) * (1 + 1e-9)
    if max(loads) > cap:
        return None, None
    order = sorted((i for i in range(len(loads)) if loads[i] > 0), key=lambda i: (-loads[i], owners[i], i))
    assigned = {b: 0.0 for b in brokers}
    undecided = {b: [] for b in brokers}  # loads of each owner's undecided bundles, largest first
    for i in order:
        undecided[owners[i]].append(loads[i])
    nodes = [0]

    def lower_bound():
        needed = 0
        for b in brokers:
            excess = assigned[b] + sum(undecided[b]) - cap
            for load in undecided[b]:
                if excess <= 0:
                    break
                excess -= load
                needed += 1
        return needed

    plan = []

    def search(position, moves, limit, previous):
        nodes[0] += 1
        if nodes[0] > node_budget:
            raise TimeoutError
        if position == len(order):
            return True
        i = order[position]
        owner, load = owners[i], loads[i]
        undecided[owner].pop(0)
        # The previous bundle's decision, if it is identical (same load and owner).
        same = previous if previous and previous[0] == (load, owner) else None
        try:
            if (same is None or same[1] == owner) and assigned[owner] + load <= cap:
                assigned[owner] += load
                if moves + lower_bound() <= limit and search(position + 1, moves, limit, ((load, owner), owner)):
                    return True
                assigned[owner] -= load
            if moves + 1 > limit:
                return False
            tried = set()
            for target in brokers:
                if target == owner or assigned[target] + load > cap:
                    continue
                if same is not None and same[1] != owner and target < same[1]:
                    continue
                # Two brokers with the same load so far and nothing of their own left to place
                # are interchangeable targets.
                shape = (assigned[target], tuple(undecided[target]))
                if not undecided[target] and shape in tried:
                    continue
                tried.add(shape)
                assigned[target] += load
                plan.append((i, owner, target))
                if moves + 1 + lower_bound() <= limit and search(position + 1, moves + 1, limit, ((load, owner), target)):
                    return True
                plan.pop()
                assigned[target] -= load
            return False
        finally:
            undecided[owner].insert(0, load)

    try:
        for limit in range(lower_bound(), len(order) + 1):
            plan.clear()
            if search(0, 0, limit, None):
                return limit, sorted(plan)
    except TimeoutError:
        return None, None
    return None, None


def brute_force_moves(loads, owners, brokers, ratio=BALANCE_TARGET):
    """minimal_moves by trying every assignment (small inputs only: the self-test's oracle)."""
    cap = ratio * sum(loads) / len(brokers) * (1 + 1e-9)
    best = None
    for assignment in itertools.product(brokers, repeat=len(loads)):
        per = collections.Counter()
        for load, broker in zip(loads, assignment):
            per[broker] += load
        if max(per.values(), default=0) <= cap:
            moves = sum(1 for a, o in zip(assignment, owners) if a != o)
            best = moves if best is None else min(best, moves)
    return best


def ping_pongs(moves, cooldown_ms):
    """The moves that are ping-pong by the reports' definition: a bundle returning to a broker it
    left within the cooldown (counted from the leaving move's end), or a move B → A started
    within the cooldown after a move A → B (of any bundle) finished. `moves` are dicts with
    bundle, from, to, started_ms, finished_ms. Returns the offending moves."""
    offending = []
    for move in moves:
        for earlier in moves:
            if earlier is move or earlier["finished_ms"] is None or earlier["finished_ms"] > move["started_ms"]:
                continue
            within = move["started_ms"] - earlier["finished_ms"] <= cooldown_ms
            returns = earlier["bundle"] == move["bundle"] and earlier["from"] == move["to"]
            reverses = earlier["from"] == move["to"] and earlier["to"] == move["from"]
            if within and (returns or reverses):
                offending.append(move)
                break
    return offending


def ratio_of(loads):
    """max/mean of per-broker loads (None if there is no load)."""
    values = list(loads)
    mean = sum(values) / len(values) if values else 0
    return max(values) / mean if mean > 0 else None


def verdict(ok):
    return "**met**" if ok else "**missed**"


def svg_lines(title, note, series, x_max, y_label, vlines=(), markers=(), hline=None, y_cap=None):
    """A line chart: series = [(label, [(x, y)], colour[, dashed])] (dashed ones thin, out of the
    legend); vlines = [(x, label)] drawn dashed;
    markers = [(x, y, colour, tooltip)] drawn as triangles; hline = (y, label) drawn dotted; with
    y_cap the axis stops there and each excursion above it is drawn at the top, labelled with its
    peak."""
    width, height = 980, 460
    left, right, top, bottom = 80, 20, 50, 80
    plot_w, plot_h = width - left - right, height - top - bottom
    ys = [y for _, points, *_ in series for _, y in points] + ([hline[0]] if hline else [])
    wanted = min(max(ys + [1.0]), y_cap or float("inf")) * 1.05
    decade = 10 ** max(0, len(str(int(wanted))) - 1)
    top_value = next(m * decade for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if m * decade >= wanted)
    clipped = []  # (x, peak, colour) of each excursion above the axis
    x_max = max(x_max, 1.0)

    def px(x):
        return left + plot_w * x / x_max

    def py(y):
        return top + plot_h - plot_h * y / top_value

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{html.escape(title)}</text>',
        f'<text x="{width / 2}" y="40" text-anchor="middle" fill="#555">{html.escape(note)}</text>',
    ]
    for tick in range(6):
        value = top_value * tick / 5
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{py(value):.1f}" y2="{py(value):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{py(value) + 4:.1f}" text-anchor="end">{value:,.0f}</text>')
    x_step = max(10, int(x_max / 10 / 10 + 1) * 10)
    for x in range(0, int(x_max) + 1, x_step):
        out.append(f'<text x="{px(x):.1f}" y="{top + plot_h + 16}" text-anchor="middle">{x}</text>')
    out.append(f'<text x="{left + plot_w / 2}" y="{top + plot_h + 34}" text-anchor="middle">'
               f'seconds since the producers started</text>')
    out.append(f'<text x="18" y="{top + plot_h / 2}" transform="rotate(-90 18 {top + plot_h / 2})" '
               f'text-anchor="middle">{html.escape(y_label)}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>')
    for x, label in vlines:
        out.append(f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{top}" y2="{top + plot_h}" '
                   f'stroke="#888" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{px(x) + 2:.1f}" y="{top + 12}" fill="#555" font-size="10">{html.escape(label)}</text>')
    if hline:
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{py(hline[0]):.1f}" y2="{py(hline[0]):.1f}" '
                   f'stroke="#000" stroke-dasharray="1 3"/>')
        out.append(f'<text x="{left + plot_w - 4}" y="{py(hline[0]) - 4:.1f}" text-anchor="end" '
                   f'font-size="10">{html.escape(hline[1])}</text>')
    for label, points, colour, *dashed in series:
        excursion = None
        for x, y in points + [(None, 0)]:
            if y > top_value:
                excursion = (excursion or (x, y))[0], max(y, (excursion or (x, y))[1])
            elif excursion:
                clipped.append((*excursion, colour))
                excursion = None
        points = [(x, min(y, top_value)) for x, y in points]
        if points:
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
            style = ' stroke-width="1.2" stroke-dasharray="5 3" opacity="0.8"' if dashed and dashed[0] else ' stroke-width="2"'
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}"{style}/>')
    for x, peak, colour in clipped:
        out.append(f'<text x="{px(x) + 3:.1f}" y="{top + 24}" fill="{colour}" font-size="10">↑ {peak:,.0f}</text>')
    for x, y, colour, tip in markers:
        cx, cy = px(x), py(min(y, top_value))
        out.append(f'<path d="M{cx:.1f},{cy - 7:.1f} L{cx - 5:.1f},{cy + 2:.1f} L{cx + 5:.1f},{cy + 2:.1f} Z" '
                   f'fill="{colour}" stroke="#000" stroke-width="0.5"><title>{html.escape(tip)}</title></path>')
    legend = [(label, colour) for label, _, colour, *dashed in series if not (dashed and dashed[0])]
    for s, (label, colour) in enumerate(legend):
        x = left + s * 150
        y = height - 14
        out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{x + 18}" y="{y}">{html.escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def self_test():
    """Checks the pure parts; prints one line per check and 'N passed, 0 failed'."""
    checks = 0

    def check(condition, what):
        nonlocal checks
        if not condition:
            raise AssertionError(what)
        checks += 1
        print(f"ok: {what}")

    # Minimal moves, by hand: 10+10 on broker 0, nothing elsewhere, 2 brokers → one move.
    check(minimal_moves([10, 10], [0, 0], [0, 1])[0] == 1, "one of two equal bundles moves")
    check(minimal_moves([5, 5, 5, 5], [0, 1, 0, 1], [0, 1])[0] == 0, "a balanced cluster needs no move")
    check(minimal_moves([30, 1], [0, 1], [0, 1]) == (None, None), "a bundle above the cap can never balance")
    # 14 unit bundles on each of 2 brokers, 4 on each of 3 others: cap 1.25 × 8 = 10, so each
    # heavy broker sheds 4.
    loads = [1.0] * 40
    owners = [0] * 14 + [1] * 14 + [2] * 4 + [3] * 4 + [4] * 4
    check(minimal_moves(loads, owners, range(5))[0] == 8, "uniform 70 % skew over 5 brokers: 8 moves")
    # A packing case: 6 + 6 on broker 0, 4 on 1, 4 on 2, cap 1.25 × 20/3 ≈ 8.33. A 6 must leave
    # broker 0 and fits on neither other (4 + 6 > 8.33) until a 4 leaves its broker too: 2 moves,
    # one of them off a broker that was under the cap.
    loads, owners = [6, 6, 4, 4], [0, 0, 1, 2]
    check(minimal_moves(loads, owners, range(3))[0] == 2 == brute_force_moves(loads, owners, range(3)),
          "a packing case needs a move off a broker under the cap")
    rng = random.Random(17)
    for case in range(300):
        n, b = rng.randint(1, 7), rng.randint(2, 3)
        loads = [rng.choice([0, 1, 2, 3, 5, 8]) * 1.0 for _ in range(n)]
        owners = [rng.choice([0, 0, 1, 2][:b + 1]) for _ in range(n)]
        found, plan = minimal_moves(loads, owners, range(b))
        expected = brute_force_moves(loads, owners, range(b)) if sum(loads) else 0
        if found is not None and plan:
            per = collections.Counter()
            moved = {i: to for i, _, to in plan}
            for i, load in enumerate(loads):
                per[moved.get(i, owners[i])] += load
            assert max(per.values()) <= BALANCE_TARGET * sum(loads) / b * (1 + 1e-9), (loads, owners, plan)
        assert found == expected, (case, loads, owners, found, expected)
    check(True, "300 random small cases agree with brute force (and every plan found is balanced)")
    # The benchmark's own layout: searched in well under a second.
    names = topic_names()
    check(all(len({bundle_index(t, p) for p in range(PARTITIONS)}) == PARTITIONS for t in names),
          "each topic's partitions hash into distinct bundles")
    check(bundle_name("t", 0) == "t/0x00000000_0x40000000" and bundle_name("t", 3) == "t/0xc0000000_0xffffffff",
          "bundle names as the records write them")
    loads = partition_loads(names, 2048 * 1024)
    owners = layout(names)
    heavy = sum(l for item, l in loads.items() if owners[item] in HEAVY_BROKERS) / sum(loads.values())
    check(abs(heavy - HEAVY_SHARE) < 1e-9, f"the layout gives the heavy brokers {heavy:.1%} of the bytes in")
    items = sorted(loads)
    started = time.monotonic()
    moves, _ = minimal_moves([loads[i] for i in items], [owners[i] for i in items], range(BROKERS))
    check(moves is not None and time.monotonic() - started < 10,
          f"the layout's minimal moves ({moves}) found in {time.monotonic() - started:.2f} s")
    # Ping-pong.
    a_b = {"bundle": "x", "from": 0, "to": 1, "started_ms": 0, "finished_ms": 1000}
    check(ping_pongs([a_b, {"bundle": "x", "from": 1, "to": 0, "started_ms": 5000, "finished_ms": 6000}], 10_000)
          != [], "a bundle sent straight back is a ping-pong")
    check(ping_pongs([a_b, {"bundle": "y", "from": 1, "to": 0, "started_ms": 5000, "finished_ms": 6000}], 10_000)
          != [], "B → A after A → B (another bundle) within the cooldown is a ping-pong")
    check(ping_pongs([a_b, {"bundle": "x", "from": 1, "to": 2, "started_ms": 5000, "finished_ms": 6000}], 10_000)
          == [], "onwards to a third broker is not")
    check(ping_pongs([a_b, {"bundle": "x", "from": 1, "to": 0, "started_ms": 20_000, "finished_ms": 21_000}], 10_000)
          == [], "a return after the cooldown is not")
    check(svg_lines("t", "n", [("a", [(0, 1), (10, 2)], COLORS[0])], 10, "y", [(5, "c1")], [(5, 1.5, "#000", "m")],
                    (2, "cap")).startswith("<svg"), "the chart renders")
    print(f"{checks} passed, 0 failed")


def partition_loads(names, total_bytes_per_second):
    """{(topic, partition): bytes/s offered}: each topic's rate from TOPIC_WEIGHTS, its records
    spread round-robin over its partitions."""
    weight_sum = sum(TOPIC_WEIGHTS)
    return {(topic, p): total_bytes_per_second * weight / weight_sum / PARTITIONS
            for topic, weight in zip(names, TOPIC_WEIGHTS) for p in range(PARTITIONS)}


# --------------------------------------------------------------------------------------------
# The cluster's records, read with etcdctl

class Etcd:
    """Reads the cluster's keys (`/skiff/<cluster-name>/v1/...`) with etcdctl, JSON values
    decoded."""

    def __init__(self, endpoints, cluster_name):
        self.endpoints = ",".join(endpoints)
        self.root = f"/skiff/{cluster_name}/v1/"

    def snapshot(self):
        """{key below the root: decoded value} for every key of the cluster."""
        result = subprocess.run(["etcdctl", f"--endpoints={self.endpoints}", "--command-timeout=5s",
                                 "get", "--prefix", self.root, "-w", "json"],
                                capture_output=True, text=True, timeout=15)
        if result.returncode != 0:
            raise RuntimeError(f"etcdctl get {self.root}: {result.stderr.strip()}")
        out = {}
        for kv in json.loads(result.stdout).get("kvs", []):
            key = base64.b64decode(kv["key"]).decode()[len(self.root):]
            value = base64.b64decode(kv.get("value", ""))
            try:
                out[key] = json.loads(value)
            except ValueError:
                out[key] = value.decode(errors="replace")
        return out


def loads_of(snapshot):
    """{broker: (load bytes/s, client bytes in/s, report's sample_ms, {(topic, p): load})} from
    the load reports; load = bytes in + replication bytes in (TrafficRecord)."""
    out = {}
    for key, record in snapshot.items():
        if key.startswith("load/"):
            traffic = record.get("traffic") or {}
            per_partition = {
                (p["topic"], p["partition"]): p.get("bytes_in_per_second", 0) + p.get("replication_bytes_in_per_second", 0)
                for p in traffic.get("partitions", [])}
            out[int(key[len("load/"):])] = (
                traffic.get("bytes_in_per_second", 0) + traffic.get("replication_bytes_in_per_second", 0),
                traffic.get("bytes_in_per_second", 0), record.get("sample_ms", 0), per_partition)
    return out


def bundles_of(snapshot):
    """{bundle name: BundleRecord} from the bundle records."""
    return {key[len("bundles/"):]: record for key, record in snapshot.items() if key.startswith("bundles/")}


def leaders_of(snapshot):
    """{(topic, partition): leader} from the partition states."""
    out = {}
    for key, record in snapshot.items():
        if key.startswith("partitions/"):
            topic, partition = key[len("partitions/"):].rsplit("/", 1)
            out[(topic, int(partition))] = record["leader"]
    return out


def metrics_address(broker):
    return [METRICS.search(line).group(1) for line in broker.log_lines if METRICS.search(line)][-1]


def placement_view(broker):
    """GET /placement/bundles of one broker (the controller adds its last shedding cycle)."""
    with urllib.request.urlopen(f"http://{metrics_address(broker)}/placement/bundles", timeout=5) as response:
        return json.loads(response.read())


# --------------------------------------------------------------------------------------------
# Clients

def error_name(code_or_text):
    """Kafka's name for an error, from a librdkafka code or its err2str text."""
    from confluent_kafka import KafkaError
    if isinstance(code_or_text, int):
        name = KafkaError(code_or_text).name()
    else:
        name = ERROR_TEXTS.get(code_or_text, code_or_text)
    return KAFKA_NAMES.get(name, name)


def _error_texts():
    from confluent_kafka import KafkaError
    texts = {}
    for code in range(-200, 200):
        try:
            error = KafkaError(code)
        except Exception:  # noqa: BLE001 - codes librdkafka does not know
            continue
        if error.name() and not error.name().startswith("ERR_"):
            texts[error.str()] = error.name()
    return texts


ERROR_TEXTS = {}


class ClientLog:
    """librdkafka's log (debug context "msg") reduced to what the application would not hear of:
    every produce error the client retried by itself ("MessageSet ... encountered error: <text>
    (actions ...)"), counted by Kafka's error name, plus warnings and errors of any facility.
    Given to the producers as `logger` (an object with a `log` method is enough), so the lines
    are filtered here without the logging module's cost."""

    MARK = "encountered error: "

    def __init__(self):
        self.retried = collections.Counter()
        self.first_retried = {}
        self.warnings = collections.Counter()
        self.lock = threading.Lock()
        self.started = time.monotonic()

    def log(self, level, fmt, *args):
        text = fmt % args if args else fmt
        at = text.find(self.MARK)
        with self.lock:
            if at >= 0:
                reason = text[at + len(self.MARK):].split(" (actions", 1)[0]
                name = error_name(reason)
                self.retried[name] += 1
                self.first_retried.setdefault(name, (time.monotonic() - self.started, text[-200:]))
            elif level >= 30:  # logging.WARNING or worse (confluent-kafka maps librdkafka's levels)
                # "FAIL [rdkafka#producer-3] [thrd:...]: 127.0.0.1:4242/1: Disconnected ...": by
                # facility and message, numbers (ports, ids, times) folded so alike lines count once.
                facility = args[0] if args else "?"
                message = str(args[-1]).split("]: ", 1)[-1] if args else text
                self.warnings[f"{facility}: {re.sub(r'[0-9]+', 'N', message)[:140]}"] += 1


class Quiet:
    """A librdkafka logger that drops everything: the admin clients' reconnect lines after a broker
    stops (their failures still surface as exceptions)."""

    def log(self, *args):
        pass


def admin_client(bootstrap):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "logger": Quiet()})


class TopicWriter:
    """One idempotent acks=all producer writing one topic at a fixed rate, round-robin over its
    partitions, 1 KiB records that start with a unique id "<topic>:<sequence>"; records every
    acknowledged (partition, offset) → sequence and every delivery error by name."""

    def __init__(self, bootstrap, topic, records_per_second, client_log, started):
        from confluent_kafka import Producer
        self.topic = topic
        self.rate = records_per_second
        self.started = started
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 20,
            "debug": "msg", "logger": client_log, "error_cb": self.on_client_error,
            "client.id": f"bench-{topic}"})
        self.acked = {}  # (partition, offset) -> sequence
        self.acked_per_partition = collections.Counter()
        self.failed = collections.Counter()  # error name -> delivery reports with that error
        self.client_errors = collections.Counter()  # error_cb: the client's own errors
        self.queue_full = 0
        self.sent = 0
        self.unfinished = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, name=f"writer-{topic}", daemon=True)

    def start(self):
        self.thread.start()
        return self

    def on_client_error(self, error):
        self.client_errors[error_name(error.code())] += 1

    def on_delivery(self, error, message):
        if error is not None:
            self.failed[error_name(error.code())] += 1
        else:
            sequence = int(message.value()[len(self.topic) + 1:].split(b".", 1)[0])
            self.acked[(message.partition(), message.offset())] = sequence
            self.acked_per_partition[message.partition()] += 1

    def run(self):
        while not self.stopping.is_set():
            due = int((time.monotonic() - self.started) * self.rate)
            while self.sent < due:
                value = f"{self.topic}:{self.sent}.".encode().ljust(RECORD_BYTES, b".")
                try:
                    self.producer.produce(self.topic, value, partition=self.sent % PARTITIONS,
                                          on_delivery=self.on_delivery)
                except BufferError:  # the client's queue is full: wait for deliveries
                    self.queue_full += 1
                    break
                self.sent += 1
            self.producer.poll(0.01)
        self.unfinished = self.producer.flush(FLUSH_TIMEOUT_S)

    def stop(self):
        self.stopping.set()
        self.thread.join(FLUSH_TIMEOUT_S + 30)


def read_back(bootstrap, topic, acked):
    """Reads every partition of `topic` from offset 0 (the client fetches from the final leader)
    up to the highest acknowledged offset. Returns (lost [(partition, offset)], duplicates: ids
    read more than once, read count)."""
    from confluent_kafka import Consumer, TopicPartition
    lost, seen_ids, duplicates, read = [], set(), 0, 0
    for partition in range(PARTITIONS):
        mine = {offset: sequence for (p, offset), sequence in acked.items() if p == partition}
        if not mine:
            continue
        end = max(mine) + 1
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-read-{os.getpid()}",
                             "enable.auto.commit": False, "fetch.max.bytes": 8 << 20})
        found = {}
        try:
            # Read up to the high watermark: acknowledged records above it are lost, and need no
            # waiting for.
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            end = min(end, high)
            consumer.assign([TopicPartition(topic, partition, 0)])
            deadline = time.monotonic() + READ_BACK_TIMEOUT_S
            position = 0
            while position < end and time.monotonic() < deadline:
                for message in consumer.consume(1000, 1.0):
                    if message.error():
                        continue
                    read += 1
                    position = message.offset() + 1
                    value = message.value()
                    sequence = int(value[len(topic) + 1:].split(b".", 1)[0])
                    found[message.offset()] = sequence
                    if sequence in seen_ids:
                        duplicates += 1
                    seen_ids.add(sequence)
        finally:
            consumer.close()
        lost.extend((partition, offset) for offset, sequence in mine.items() if found.get(offset) != sequence)
    return lost, duplicates, read


# --------------------------------------------------------------------------------------------
# The run

class Sampler:
    """Every SAMPLE_S: the cluster's records from etcd (load reports, bundle records, partition
    leaders), the controller's last shedding cycle (GET /placement/bundles) and the producers'
    acknowledgement counts. Keeps the samples, the cycles by time and the moves seen."""

    def __init__(self, etcd, cluster, writers, started, started_wall_ms):
        self.etcd = etcd
        self.started_wall_ms = started_wall_ms
        self.cluster = cluster
        self.writers = writers
        self.started = started
        self.samples = []
        self.cycles = {}  # at_ms -> the controller's LastCycle
        self.moves = {}  # (bundle, started_ms) -> move dict
        self.transitions = []  # (t, bundle, before, after) of owner/state changes
        self.errors = collections.Counter()
        self.last_error = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, name="sampler", daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()
        self.thread.join(30)

    def run(self):
        while not self.stopping.is_set():
            began = time.monotonic()
            try:
                self.sample()
            except Exception as error:  # noqa: BLE001 - a sample racing an election: next one
                self.errors[type(error).__name__] += 1
                self.last_error = repr(error)
            self.stopping.wait(max(0.0, SAMPLE_S - (time.monotonic() - began)))

    def sample(self):
        now = time.monotonic()
        snapshot = self.etcd.snapshot()
        wall_ms = int(time.time() * 1000)
        acked = {(w.topic, p): n for w in self.writers for p, n in list(w.acked_per_partition.items())}
        bundles = bundles_of(snapshot)
        sample = {"t": now - self.started, "wall_ms": wall_ms, "loads": loads_of(snapshot),
                  "bundles": bundles, "leaders": leaders_of(snapshot), "acked": acked,
                  "controller": (snapshot.get("controller") or {}).get("broker_id")}
        previous = self.samples[-1]["bundles"] if self.samples else {}
        for name, record in bundles.items():
            before = previous.get(name)
            state = (record["owner"], record["state"], record.get("target"))
            if before is not None and (before["owner"], before["state"], before.get("target")) != state:
                was = (before["owner"], before["state"], before.get("target"))
                self.transitions.append((sample["t"], name, was, state))
                print(f"{sample['t']:7.1f} s  bundle {name}: owner {was[0]} {was[1]}"
                      f"{' → ' + str(was[2]) if was[2] is not None else ''}  ⇒  owner {state[0]} {state[1]}"
                      f"{' → ' + str(state[2]) if state[2] is not None else ''}", file=sys.stderr)
            for move in record.get("moves", []):
                self.moves[(name, move["started_ms"])] = dict(move, bundle=name)
            if record["state"] == "assigning":
                key = (name, record["since_ms"])
                self.moves.setdefault(key, {"bundle": name, "from": record["owner"], "to": record.get("target"),
                                            "started_ms": record["since_ms"], "finished_ms": None})
        controller = sample["controller"]
        if controller is not None and 0 <= controller < len(self.cluster.brokers):
            cycle = placement_view(self.cluster.brokers[controller]).get("cycle")
            if cycle and cycle.get("at_ms") and cycle["at_ms"] not in self.cycles:
                self.cycles[cycle["at_ms"]] = cycle
                loads = ", ".join(f"{b['broker']}: {b['load_bytes_per_second'] / 1024:,.0f}"
                                  for b in sorted(cycle.get("brokers", []), key=lambda b: b["broker"]))
                planned = "; ".join(f"{m['bundle']} {m['from']} → {m['to']} ({m['outcome']})"
                                    for m in cycle.get("moves", []))
                print(f"{sample['t']:7.1f} s  shedding cycle at {(cycle['at_ms'] - self.started_wall_ms) / 1000:.1f} s: "
                      f"KiB/s {loads or 'no load'}; moves: {planned or 'none'}", file=sys.stderr)
        self.samples.append(sample)


def client_loads(samples, sample):
    """Bytes in per broker as the clients saw them: the records acknowledged per partition since
    the sample before `sample`, per second, given to the partition's leader at `sample` (a
    cross-check of the reports, which lag by up to their interval)."""
    index = samples.index(sample)
    if index == 0:
        return {}
    before = samples[index - 1]
    seconds = sample["t"] - before["t"]
    out = collections.Counter()
    for item, count in sample["acked"].items():
        leader = sample["leaders"].get(item)
        if leader is not None:
            out[leader] += (count - before["acked"].get(item, 0)) * RECORD_BYTES / seconds
    return out


def topic_rates(names, total_bytes_per_second):
    weight_sum = sum(TOPIC_WEIGHTS)
    return {t: total_bytes_per_second * w / weight_sum / RECORD_BYTES for t, w in zip(names, TOPIC_WEIGHTS)}


def bootstrap_of(cluster):
    return ",".join(b.bootstrap for b in cluster.running())


def ready(cluster, count):
    """Waits (bounded) for one agreed controller and `count` brokers in Metadata."""
    agreed_controller(cluster)
    admin = admin_client(bootstrap_of(cluster))
    wait_for(lambda: len(admin.list_topics(timeout=10).brokers) == count, READY_TIMEOUT_S,
             f"{count} broker(s) in Metadata")


# CreateTopics' error code when a broker refuses the request as such (here: a broker that takes no
# replica assignment, "manual replica assignment is not supported yet").
INVALID_REQUEST = 42


def create_topics(cluster, records, owners, names):
    """Creates the topics with every partition on (and led by) its broker of `owners`; returns how.
    Kafka's way first: CreateTopics with replica assignments. A broker that refuses them gets the
    same layout from placement itself: each broker's topics are created while it is the only
    broker registered, so placement (which picks among the running brokers) has no other choice;
    then every broker starts again."""
    from confluent_kafka.admin import NewTopic
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError as ClientError
    config = {"min.insync.replicas": "1"}
    # kafka-python, as Kafka's rules want it: partition count and replication factor -1 beside the
    # assignment (confluent-kafka 2.16 refuses a -1 count with an assignment before sending).
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_of(cluster), request_timeout_ms=60_000)
    try:
        admin.create_topics({t: {"num_partitions": -1, "replication_factor": -1, "configs": config,
                                 "assignments": {p: [owners[(t, p)]] for p in range(PARTITIONS)}} for t in names},
                            timeout_ms=30_000)
        return "CreateTopics with explicit replica assignments"
    except ClientError as error:
        if getattr(error, "errno", None) != INVALID_REQUEST:
            raise
        refusal = str(error)
    finally:
        admin.close()
    print(f"CreateTopics refused the replica assignments ({refusal}): creating each broker's topics "
          "while it runs alone", file=sys.stderr)
    for broker in cluster.running():
        broker.stop()

    def registered():
        return sorted(int(k[len("brokers/"):]) for k in records.snapshot() if k.startswith("brokers/"))
    for node in sorted(set(owners.values())):
        wait_for(lambda: registered() == [], SESSION_MS / 1000 + 10, "no broker registered")
        broker = cluster.brokers[node].start()
        wait_for(lambda: registered() == [node] and (records.snapshot().get("controller") or {}).get("broker_id") == node,
                 READY_TIMEOUT_S, f"broker {node} registered alone and controller")
        mine = [t for t in names if owners[(t, 0)] == node]
        alone = admin_client(broker.bootstrap)
        for future in alone.create_topics([NewTopic(t, PARTITIONS, 1, config=config) for t in mine],
                                          operation_timeout=30).values():
            future.result(60)
        wait_for(lambda: all(leaders_of(records.snapshot()).get((t, p)) == node for t in mine for p in range(PARTITIONS)),
                 LAYOUT_TIMEOUT_S, f"broker {node}'s topics led by it")
        broker.stop()
    cluster.start()
    ready(cluster, len(cluster.brokers))
    return (f"one broker at a time (CreateTopics refused the replica assignments: \"{refusal}\"): each "
            "broker's topics were created, by placement, while it was the only broker registered")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "reports" / "placement-live.md"))
    parser.add_argument("--shed-interval-ms", type=int, default=10_000)
    # 16: the skiff shedder acts on a pair gap under its high threshold only after 8 cycles in a
    # row (its low hit count), so a run of 8 cycles ends before such a move could show.
    parser.add_argument("--cycles", type=int, default=16, help="shedding cycles to run once the load is reported")
    parser.add_argument("--duration-s", type=float, help="run this long after the load is first reported "
                                                         "(default: --cycles cycles)")
    parser.add_argument("--total-kib-s", type=float, default=2048, help="bytes in offered, all topics")
    parser.add_argument("--moves-max", type=int, help="skiff.placement.shed.moves.max (default: the broker's)")
    parser.add_argument("--shedder", help="skiff.placement.shedder (default: the broker's)")
    parser.add_argument("--broker-bin", default=conftest.BROKER_BIN)
    parser.add_argument("--logs-dir", help="where the brokers' logs go (default: a new temporary directory)")
    parser.add_argument("--no-load-ok", action="store_true",
                        help="go on (and write the report) when no broker reports traffic: checks the "
                             "script itself on a broker without the traffic counters")
    parser.add_argument("--self-test", action="store_true", help="check the pure parts and exit")
    parser.add_argument("--render", metavar="DATA_JSON",
                        help="write the report (to --out) again from a run's data, without running anything")
    args = parser.parse_args()
    if args.self_test:
        self_test()
        return 0
    if args.render:
        return render(json.loads(pathlib.Path(args.render).read_text()), pathlib.Path(args.out))
    missing = [tool for tool in ("etcd", "etcdctl") if shutil.which(tool) is None]
    if missing or not os.path.exists(args.broker_bin):
        sys.exit(f"needs {', '.join(missing) or ''} on PATH and the release broker at {args.broker_bin} "
                 "(cargo build --release -p skiff-broker --features etcd, or --broker-bin)")
    conftest.BROKER_BIN = args.broker_bin
    ERROR_TEXTS.update(_error_texts())
    command = "python3 bench/scripts/placement_live.py " + " ".join(sys.argv[1:])
    interval_s = args.shed_interval_ms / 1000
    load_before = os.getloadavg()

    names = topic_names()
    offered = partition_loads(names, args.total_kib_s * 1024)
    owners = layout(names)
    rates = topic_rates(names, args.total_kib_s * 1024)
    settings = [f"skiff.placement.shed.interval.ms={args.shed_interval_ms}",
                f"skiff.placement.bundle.cooldown.ms={COOLDOWN_MS}",
                # RF 1: a move's reassignment briefly has 2 replicas; acks=all must not wait on
                # a second one that is still catching up.
                "min.insync.replicas=1", "replica.lag.time.max.ms=5000", "replica.fetch.wait.max.ms=200"]
    if args.moves_max:
        settings.append(f"skiff.placement.shed.moves.max={args.moves_max}")
    if args.shedder:
        settings.append(f"skiff.placement.shedder={args.shedder}")

    etcd = EtcdCluster().start()
    cluster = None
    writers, sampler = [], None
    outcome = {}
    try:
        cluster = SkiffCluster(etcd, BROKERS, settings).start()
        ready(cluster, BROKERS)
        records = Etcd(etcd.endpoints, cluster.name)
        how_laid_out = create_topics(cluster, records, owners, names)
        bootstrap = bootstrap_of(cluster)
        # The layout took: every partition led by its assigned broker, every bundle record
        # written and owned by that broker.
        expected_bundles = {bundle_name(t, bundle_index(t, p)): owners[(t, p)] for t, p in offered}

        def laid_out():
            snapshot = records.snapshot()
            leaders, bundles = leaders_of(snapshot), bundles_of(snapshot)
            wrong = {k: v for k, v in owners.items() if leaders.get(k) != v}
            wrong_bundles = {n: (bundles.get(n) or {}).get("owner") for n, o in expected_bundles.items()
                             if (bundles.get(n) or {}).get("owner") != o}
            return True if not wrong and not wrong_bundles else None
        try:
            wait_for(laid_out, LAYOUT_TIMEOUT_S, "every partition led, and every bundle owned, by its assigned broker")
        except AssertionError:
            snapshot = records.snapshot()
            print(f"the layout did not take: leaders {leaders_of(snapshot)}, bundles "
                  f"{ {n: r['owner'] for n, r in bundles_of(snapshot).items()} }", file=sys.stderr)
            return 1

        started = time.monotonic()
        started_wall_ms = int(time.time() * 1000)
        client_log = ClientLog()
        writers = [TopicWriter(bootstrap, t, rates[t], client_log, started).start() for t in names]
        sampler = Sampler(records, cluster, writers, started, started_wall_ms).start()

        # The shedder moves nothing until the reports carry the traffic: wait for it, bounded.
        offered_total = sum(offered.values())

        def load_reported():
            if not sampler.samples:
                return None
            loads = sampler.samples[-1]["loads"]
            client = sum(v[1] for v in loads.values())
            return client if client >= 0.5 * offered_total else None
        load_seen_ms = None
        try:
            wait_for(load_reported, LOAD_TIMEOUT_S, "load reports with half the offered bytes in")
            load_seen_ms = int(time.time() * 1000)
            # What a broker really writes (the partitions cut to two), for the record.
            example = next((v for k, v in records.snapshot().items() if k.startswith("load/")), {})
            traffic = dict(example.get("traffic") or {})
            traffic["partitions"] = (traffic.get("partitions") or [])[:2]
            print(f"a load report: {json.dumps(dict(example, traffic=traffic))}", file=sys.stderr)
        except AssertionError:
            reported = {b: v[1] for b, v in (sampler.samples[-1]["loads"] if sampler.samples else {}).items()}
            message = (f"NO LOAD REPORTED: within {LOAD_TIMEOUT_S} s of the producers starting "
                       f"({offered_total / 1024:,.0f} KiB/s offered, {sum(w.sent for w in writers):,} records sent) "
                       f"the brokers' load reports (etcd {records.root}load/<id>, traffic.bytes_in_per_second) "
                       f"show {reported} bytes/s: LoadRecord.traffic stays empty (a broker without the "
                       f"per-partition traffic counters), so the shedder sees no load and moves nothing.")
            if not args.no_load_ok:
                print(message, file=sys.stderr)
                outcome["exit"] = 2
                return 2
            print(message + " Going on (--no-load-ok).", file=sys.stderr)
            load_seen_ms = int(time.time() * 1000)
        # Cycle 1 runs within one interval of the load showing; cycle N + 1 ends the wait.
        run_s = args.duration_s if args.duration_s else (args.cycles + 2) * interval_s + 2 * SAMPLE_S
        print(f"load reported {((load_seen_ms - started_wall_ms) / 1000):.1f} s after the producers started; "
              f"running {run_s:.0f} s more", file=sys.stderr)
        deadline = time.monotonic() + run_s
        while time.monotonic() < deadline:
            time.sleep(1)
            counted = [at for at in sampler.cycles if at >= load_seen_ms]
            if not args.duration_s and len(counted) > args.cycles:
                break  # cycle N + 1 has run: cycle N is over
        # Let moves in flight finish before the producers stop (bounded).
        try:
            wait_for(lambda: sampler.samples and all(r["state"] == "owned" for r in sampler.samples[-1]["bundles"].values()),
                     60, "the moves in flight to finish")
        except AssertionError as error:
            print(f"warning: {error}", file=sys.stderr)
        for writer in writers:
            writer.stopping.set()
        for writer in writers:
            writer.stop()
        stopped_s = time.monotonic() - started
        sampler.stop()
        final = records.snapshot()
        lost, duplicates, read, acked_total = [], 0, 0, 0
        for writer in writers:
            acked = {(p, o): s for (p, o), s in writer.acked.items()}
            acked_total += len(acked)
            topic_lost, topic_duplicates, topic_read = read_back(bootstrap, writer.topic, acked)
            lost.extend((writer.topic, p, o) for p, o in topic_lost)
            duplicates += topic_duplicates
            read += topic_read
        outcome.update(final=final, lost=lost, duplicates=duplicates, read=read, acked_total=acked_total,
                       stopped_s=stopped_s, load_seen_ms=load_seen_ms, started_wall_ms=started_wall_ms,
                       how_laid_out=how_laid_out)
    finally:
        for writer in writers:
            writer.stopping.set()
        for writer in writers:
            if writer.thread.is_alive():
                writer.stop()
        if sampler is not None:
            sampler.stop()
        if cluster is not None:
            cluster.stop()
            # Every broker's log (each start appended), for whatever the report cannot say.
            logs_dir = pathlib.Path(args.logs_dir or tempfile.mkdtemp(prefix="placement-live-logs-"))
            logs_dir.mkdir(parents=True, exist_ok=True)
            for index, broker in enumerate(cluster.brokers):
                (logs_dir / f"broker-{index}.log").write_text(ANSI.sub("", "".join(broker.log_lines)))
            print(f"broker logs in {logs_dir}", file=sys.stderr)
        etcd.stop()
    if "final" not in outcome:
        return outcome.get("exit", 1)
    data = run_data(args, command, names, rates, offered, owners, settings, sampler, writers, client_log, outcome,
                    (load_before, os.getloadavg()))
    out = pathlib.Path(args.out)
    data_path = data_path_of(out)
    data_path.parent.mkdir(parents=True, exist_ok=True)
    data_path.write_text(json.dumps(data, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {data_path}", file=sys.stderr)
    return render(data, out)


def data_path_of(out):
    """Where a run's raw data goes: `data/<report>.json` beside the report (bench/reports keeps
    reports, bench/reports/data their raw records)."""
    return out.parent / "data" / (out.stem + ".json")


def render(data, out):
    """Writes the report and its chart from a run's data; 1 if a target was missed."""
    report, svg, failed = write_report(*hydrate(data))
    svg_path = out.with_suffix(".svg")
    out.write_text(report.replace("](SVG)", f"]({svg_path.name})"))
    svg_path.write_text(svg)
    print(out.read_text())
    print(f"wrote {out} and {svg_path}", file=sys.stderr)
    return 1 if failed else 0


# A run's data as JSON (`data/<report>.json`, rendered again by --render): (topic, partition)
# keys are written "topic/partition".

def _key(item):
    return f"{item[0]}/{item[1]}"


def _item(key):
    topic, partition = key.rsplit("/", 1)
    return topic, int(partition)


def run_data(args, command, names, rates, offered, owners, settings, sampler, writers, client_log, outcome,
             load_averages):
    """Everything the report is made of, JSON-safe (the acknowledged records themselves stay out:
    the read-back already judged them)."""
    def sample(s):
        return {"t": round(s["t"], 3), "wall_ms": s["wall_ms"], "controller": s["controller"],
                "loads": {str(b): [round(v[0], 1), round(v[1], 1), v[2], {_key(i): round(l, 1) for i, l in v[3].items()}]
                          for b, v in s["loads"].items()},
                "leaders": {_key(i): b for i, b in s["leaders"].items()},
                "acked": {_key(i): n for i, n in s["acked"].items()}}
    return {
        "command": command,
        "args": {"shed_interval_ms": args.shed_interval_ms, "total_kib_s": args.total_kib_s,
                 "broker_bin": args.broker_bin, "cycles": args.cycles},
        "names": names, "rates": rates, "settings": settings, "load_averages": [list(l) for l in load_averages],
        "offered": {_key(i): v for i, v in offered.items()}, "owners": {_key(i): b for i, b in owners.items()},
        "samples": [sample(s) for s in sampler.samples],
        "cycles": [sampler.cycles[at] for at in sorted(sampler.cycles)],
        "moves": sorted(sampler.moves.values(), key=lambda m: (m["started_ms"], m["bundle"])),
        "transitions": [[t, name, list(was), list(now)] for t, name, was, now in sampler.transitions],
        "sample_errors": dict(sampler.errors), "sample_last_error": sampler.last_error,
        "writers": [{"topic": w.topic, "sent": w.sent, "unfinished": w.unfinished, "queue_full": w.queue_full,
                     "failed": dict(w.failed), "client_errors": dict(w.client_errors)} for w in writers],
        "client_log": {"retried": dict(client_log.retried), "warnings": dict(client_log.warnings)},
        "outcome": {"final_leaders": {_key(i): b for i, b in leaders_of(outcome["final"]).items()},
                    "lost": [list(x) for x in outcome["lost"]],
                    **{k: outcome[k] for k in ("duplicates", "read", "acked_total", "stopped_s", "load_seen_ms",
                                               "started_wall_ms", "how_laid_out")}},
    }


def hydrate(data):
    """write_report's arguments from a run's data."""
    from types import SimpleNamespace as Namespace
    args = Namespace(**data["args"])
    samples = [{"t": s["t"], "wall_ms": s["wall_ms"], "controller": s["controller"],
                "loads": {int(b): (v[0], v[1], v[2], {_item(k): l for k, l in v[3].items()}) for b, v in s["loads"].items()},
                "leaders": {_item(k): b for k, b in s["leaders"].items()},
                "acked": {_item(k): n for k, n in s["acked"].items()}} for s in data["samples"]]
    sampler = Namespace(samples=samples, cycles={c["at_ms"]: c for c in data["cycles"]},
                        moves={i: m for i, m in enumerate(data["moves"])},
                        transitions=[(t, name, tuple(was), tuple(now)) for t, name, was, now in data["transitions"]],
                        errors=data["sample_errors"], last_error=data["sample_last_error"])
    writers = [Namespace(topic=w["topic"], sent=w["sent"], unfinished=w["unfinished"], queue_full=w["queue_full"],
                         failed=collections.Counter(w["failed"]), client_errors=collections.Counter(w["client_errors"]))
               for w in data["writers"]]
    client_log = Namespace(retried=collections.Counter(data["client_log"]["retried"]),
                           warnings=collections.Counter(data["client_log"]["warnings"]))
    outcome = dict(data["outcome"], final_leaders={_item(k): b for k, b in data["outcome"]["final_leaders"].items()},
                   lost=[tuple(x) for x in data["outcome"]["lost"]])
    offered = {_item(k): v for k, v in data["offered"].items()}
    owners = {_item(k): b for k, b in data["owners"].items()}
    return (args, data["command"], data["names"], data["rates"], offered, owners, data["settings"], sampler, writers,
            client_log, outcome, data["load_averages"])


def write_report(args, command, names, rates, offered, owners, settings, sampler, writers, client_log, outcome,
                 load_averages):
    """The markdown report (its chart linked as "SVG", named by render) and the chart; returns
    (markdown, svg, any target missed)."""
    started_ms = outcome["started_wall_ms"]
    load_seen_ms = outcome["load_seen_ms"]
    interval_ms = args.shed_interval_ms

    def t_of(ms):
        return (ms - started_ms) / 1000

    # Cycles counted from the first one that ran with the load reported.
    cycles = sorted(at for at in sampler.cycles if at >= load_seen_ms)
    all_cycles = sorted(sampler.cycles)
    # Moves, in the order they started.
    moves = sorted(sampler.moves.values(), key=lambda m: (m["started_ms"], m["bundle"]))

    def cycle_of(ms):
        number = sum(1 for at in cycles if at <= ms + 1000)  # the record is written just after its cycle
        return number or None

    # The end of cycle 5: when cycle 6 ran (or would have, one interval after cycle 5).
    end_ms = None
    if len(cycles) >= TARGET_CYCLE:
        end_ms = cycles[TARGET_CYCLE] if len(cycles) > TARGET_CYCLE else cycles[TARGET_CYCLE - 1] + interval_ms
    at_end = None
    if end_ms is not None:
        before = [s for s in sampler.samples if s["wall_ms"] <= end_ms]
        at_end = before[-1] if before else None
    end_loads = {b: v[0] for b, v in at_end["loads"].items()} if at_end else {}
    end_ratio = ratio_of(end_loads[b] if b in end_loads else 0 for b in range(BROKERS)) if at_end else None

    # The starting per-bundle loads: the owners' reports when cycle 1 ran (what the shedder
    # started from), each bundle being one partition here.
    first = None
    if cycles:
        before = [s for s in sampler.samples if s["wall_ms"] <= cycles[0]]
        first = before[-1] if before else None
    start_bundles = {}
    if first:
        for (topic, partition), owner in owners.items():
            name = bundle_name(topic, bundle_index(topic, partition))
            report = first["loads"].get(owner)
            start_bundles[name] = (report[3].get((topic, partition), 0.0) if report else 0.0, owner)
    measured = sorted(start_bundles)
    minimal, minimal_plan = (minimal_moves([start_bundles[n][0] for n in measured],
                                           [start_bundles[n][1] for n in measured], range(BROKERS))
                             if measured and any(start_bundles[n][0] for n in measured) else (None, None))
    offered_items = sorted(offered)
    minimal_offered, _ = minimal_moves([offered[i] for i in offered_items], [owners[i] for i in offered_items],
                                       range(BROKERS))
    started_moves = moves
    moves_by_end = [m for m in started_moves if end_ms is None or m["started_ms"] <= end_ms]

    def moves_ratio(made):
        if minimal is None:
            return f"{len(made)} ÷ n/a"
        return f"{len(made)} ÷ {minimal}" + (f" = {len(made) / minimal:.2f}" if minimal else "")

    def moves_ok(made):
        return (minimal is not None and end_ratio is not None and end_ratio <= BALANCE_TARGET
                and len(made) <= MOVES_FACTOR_TARGET * minimal)
    aborted = [t for t in sampler.transitions if t[2][1] == "assigning" and t[3][1] == "owned" and t[3][0] == t[2][0]]
    pongs = ping_pongs([dict(m, finished_ms=m["finished_ms"]) for m in moves], COOLDOWN_MS)

    # Client errors: retried by the client (its log), failed deliveries, client-level errors.
    retried = client_log.retried
    failed = sum((w.failed for w in writers), collections.Counter())
    client_errors = sum((w.client_errors for w in writers), collections.Counter())
    unexpected = {n for n in list(retried) + list(failed) + list(client_errors) if n not in ALLOWED_ERRORS}
    errors_ok = not unexpected and not failed
    lost = outcome["lost"]
    unfinished = sum(w.unfinished for w in writers)

    targets = [
        ("max/mean bytes in per broker at the end of cycle 5", f"{end_ratio:.3f}" if end_ratio else "n/a",
         f"≤ {BALANCE_TARGET}", end_ratio is not None and end_ratio <= BALANCE_TARGET),
        (f"bundle moves started within {TARGET_CYCLE} cycles ÷ minimal moves from the starting loads "
         "(counts only with the balance reached)", moves_ratio(moves_by_end),
         f"≤ {MOVES_FACTOR_TARGET}×", moves_ok(moves_by_end)),
        (f"the same over the whole run ({len(cycles)} cycles; the stricter reading: later moves count too)",
         moves_ratio(started_moves), f"≤ {MOVES_FACTOR_TARGET}×", moves_ok(started_moves)),
        ("ping-pong moves", str(len(pongs)), "0", not pongs),
        ("client errors other than " + " / ".join(sorted(ALLOWED_ERRORS)) + ", or any failed delivery",
         str(sum(failed.values()) + sum(c for n, c in (retried + client_errors).items() if n not in ALLOWED_ERRORS)),
         "0", errors_ok),
        ("acknowledged records lost", f"{len(lost)} of {outcome['acked_total']:,}", "0",
         not lost and outcome["acked_total"] > 0),
    ]
    any_missed = not all(ok for *_, ok in targets)

    # The chart: each broker's reported load over time, cycles and finished moves marked.
    series = []
    for b in range(BROKERS):
        points = [(s["t"], s["loads"][b][0] / 1024) for s in sampler.samples if b in s["loads"]]
        series.append((f"broker {b}" + (" (heavy)" if b in HEAVY_BROKERS else ""), points, COLORS[b % len(COLORS)]))
    for b in range(BROKERS):
        points = [(s["t"], client_loads(sampler.samples, s).get(b, 0) / 1024) for s in sampler.samples[1:]]
        series.append((f"broker {b}, clients", points, COLORS[b % len(COLORS)], True))
    vlines = [(t_of(at), f"c{i + 1}") for i, at in enumerate(cycles)]
    markers = []
    for m in moves:
        if m["finished_ms"] is not None:
            x = t_of(m["finished_ms"])
            near = [s for s in sampler.samples if s["t"] >= x and m["to"] in s["loads"]]
            y = near[0]["loads"][m["to"]][0] / 1024 if near else 0
            markers.append((x, y, COLORS[m["to"] % len(COLORS)], f"{m['bundle']}: {m['from']} → {m['to']}"))
    mean_kib = sum(offered.values()) / BROKERS / 1024
    x_max = max([s["t"] for s in sampler.samples] + [1])
    svg = svg_lines("Bytes in per broker (load reports), shedding cycles and bundle moves",
                    f"{BROKERS} brokers, {TOPICS}×{PARTITIONS} partitions RF 1, {args.total_kib_s:,.0f} KiB/s offered; "
                    f"solid: reports; thin dashed: acknowledged by leader; c1…: cycles; ▲ a move finished (its target's colour)", series, x_max, "KiB/s",
                    vlines, markers, (BALANCE_TARGET * mean_kib, f"{BALANCE_TARGET} × offered mean"),
                    # The catch-up spikes would flatten everything else: the axis stops a little
                    # above the clients' busiest broker, and the spikes are labelled.
                    y_cap=1.3 * max([y for _, points, *_ in series[BROKERS:] for _, y in points] + [mean_kib]))

    heavy = sum(l for i, l in offered.items() if owners[i] in HEAVY_BROKERS) / sum(offered.values())
    lines = [
        "# Placement live: bundle shedding on a 5-broker cluster (issue 17)",
        "",
        f"One run, this machine ({os.cpu_count()} cores), load average {load_averages[0][0]:.1f} before and "
        f"{load_averages[1][0]:.1f} after. `{command}`",
        "",
        "## Setup",
        "",
        f"- 3 etcd members and {BROKERS} brokers (`{args.broker_bin}`) on loopback, "
        f"broker session {SESSION_MS} ms; broker settings: " + ", ".join(f"`{s}`" for s in settings) + ".",
        f"- {TOPICS} topics × {PARTITIONS} partitions, replication factor 1, laid out by "
        f"{outcome['how_laid_out']}. With one replica a broker's bytes in are exactly what it leads, and a "
        "bundle move is a reassignment: the target is added as a replica, catches up, takes the leadership "
        "and the old replica is dropped.",
        f"- Each topic is its own bundle namespace with {BUNDLES_PER_TOPIC} bundles (quarters of the CRC32 "
        "space of `<topic>-<partition>`); the topic names carry a suffix chosen so that each partition falls "
        "in a bundle of its own, so a bundle is one partition, owned by its preferred leader.",
        f"- Producers: one idempotent acks=all confluent-kafka producer per topic (linger.ms 20), "
        f"{RECORD_BYTES}-byte records, each starting with a unique id, round-robin over the partitions at a "
        f"fixed rate per topic ({args.total_kib_s:,.0f} KiB/s in all, weights {TOPIC_WEIGHTS}).",
        f"- Layout (the table below): brokers {HEAVY_BROKERS[0]} and {HEAVY_BROKERS[1]} lead "
        f"**{heavy:.1%}** of the bytes in, the other three about 10 % each.",
        f"- Sampled every {SAMPLE_S:.0f} s: every key of the cluster in etcd (`etcdctl get --prefix`; load "
        "reports, bundle records, partition states) and the controller's `GET /placement/bundles` (its last "
        "cycle). A broker's load is its report's `traffic.bytes_in_per_second + "
        "traffic.replication_bytes_in_per_second`, as the shedder weighs it.",
        f"- Cycles are counted from the first one that ran after the reports showed the load "
        f"({t_of(load_seen_ms):.1f} s after the producers started); the producers stopped at "
        f"{outcome['stopped_s']:.0f} s, when cycle {len(cycles)} had run ({len(all_cycles)} cycles in all), and "
        "every partition was then read back from its final leader.",
        "",
        "| topic | records/s | partition → leader at the start (bundle load KiB/s) |",
        "|---|---|---|",
    ]
    for topic in names:
        cells = ", ".join(f"{p} → {owners[(topic, p)]} ({offered[(topic, p)] / 1024:.0f})" for p in range(PARTITIONS))
        lines.append(f"| `{topic}` | {rates[topic]:.0f} | {cells} |")
    lines += ["", "![bytes in per broker](SVG)", "", "## Targets (docs/design/placement.md §3.3b, live cluster)", "",
              "| target | measured | bar | |", "|---|---|---|---|"]
    lines += [f"| {name} | {value} | {bar} | {verdict(ok)} |" for name, value, bar, ok in targets]
    start_loads = {b: v[0] for b, v in first["loads"].items()} if first else {}

    # A moved partition's catch-up counts as replication bytes in on its target until the next
    # report: the peak, to read the chart's spikes by.
    peak = max(((v[0] - v[1], b, s["t"]) for s in sampler.samples for b, v in s["loads"].items()), default=None)
    final_leaders = outcome["final_leaders"]
    led = collections.Counter(final_leaders.get(item) for item in offered)
    led_load = collections.Counter()
    for item, load in offered.items():
        led_load[final_leaders.get(item)] += load

    # Cycles whose view of a broker included a catch-up (replication bytes in of a moved
    # partition): its load as the controller scored it against the offered bytes it led then.
    inflated = []
    for number, at in enumerate(cycles, 1):
        before = [s for s in sampler.samples if s["wall_ms"] <= at]
        if not before:
            continue
        for scored in sampler.cycles[at].get("brokers", []):
            leads = sum(l for item, l in offered.items() if before[-1]["leaders"].get(item) == scored["broker"])
            if scored["load_bytes_per_second"] > 1.5 * max(leads, 1.0):
                inflated.append(f"cycle {number}: broker {scored['broker']} at "
                                f"{scored['load_bytes_per_second'] / 1024:,.0f} KiB/s (leading {leads / 1024:,.0f})")

    # The balance verdict reads the reports (the load as the shedder weighs it); say so when the
    # clients' view or the offered rates at the final leaders fall on the other side of the bar.
    edge_note = ""
    if at_end:
        views = {"reports": end_ratio, "clients": ratio_of(client_loads(sampler.samples, at_end).get(b, 0)
                                                            for b in range(BROKERS)),
                 "offered rates at its leaders": ratio_of(
                     sum(load for item, load in offered.items() if at_end["leaders"].get(item) == b)
                     for b in range(BROKERS))}
        sides = {name: value <= BALANCE_TARGET for name, value in views.items() if value is not None}
        if len(set(sides.values())) > 1:
            edge_note = (" **On the edge:** " + ", ".join(f"{name} {views[name]:.3f}" for name in sides)
                         + f" fall on both sides of {BALANCE_TARGET}; the verdict reads the reports.")

    def per_broker(loads):
        return (", ".join(f"{b}: {loads.get(b, 0) / 1024:,.0f}" for b in range(BROKERS)) + " KiB/s "
                f"(max/mean {ratio_of(loads.get(b, 0) for b in range(BROKERS)) or 0:.3f})")
    lines += [
        "",
        f"- Bytes in per broker at cycle 1 (reports): " + (per_broker(start_loads) if first else "n/a")
        + ("; as the clients saw it (acknowledged bytes per partition given to its leader): "
           + per_broker(client_loads(sampler.samples, first)) if first else "") + ".",
        f"- At the end of cycle {TARGET_CYCLE} (the last sample before cycle {TARGET_CYCLE + 1}"
        + (f", {t_of(at_end['wall_ms']):.0f} s; reports): " + per_broker(end_loads)
           + "; as the clients saw it: " + per_broker(client_loads(sampler.samples, at_end)) if at_end else "): n/a")
        + "." + edge_note,
        f"- Minimal moves: exact search over the {len(measured)} bundles' loads as their owners reported them "
        f"when cycle 1 ran: **{minimal if minimal is not None else 'n/a'}**"
        + (f" (e.g. {', '.join(f'{measured[i]} {a} → {b}' for i, a, b in minimal_plan)})" if minimal_plan else "")
        + f"; from the offered rates: {minimal_offered}. Moves started within {TARGET_CYCLE} cycles: "
        f"{len(moves_by_end)}; over the run: {len(started_moves)}, of which {len(aborted)} aborted.",
        f"- Ping-pong: a bundle returning to a broker it left within the cooldown ({COOLDOWN_MS / 1000:.0f} s), "
        "or a move B → A after a move A → B; counted over every move seen"
        + (": " + ", ".join(f"{m['bundle']} {m['from']} → {m['to']}" for m in pongs) if pongs else "") + ".",
        (f"- Replication bytes in (the catch-up of moved partitions, counted in the load until the next "
         f"report): peak {peak[0] / 1024:,.0f} KiB/s on broker {peak[1]} at {peak[2]:.0f} s." if peak and peak[0] > 0
         else "- Replication bytes in: none reported."),
        ("- Cycles that weighed a catch-up as load: " + "; ".join(inflated) + "." if inflated
         else "- No cycle weighed a catch-up as load (a broker's scored load above 1.5× the offered bytes it led)."),
        "- At the end (final partition leaders, with the offered bytes in they lead): "
        + ", ".join(f"{b}: {led[b]} partitions, {led_load[b] / 1024:,.0f} KiB/s" for b in range(BROKERS))
        + f" (max/mean {ratio_of(led_load[b] for b in range(BROKERS)) or 0:.3f}).",
        "",
        "## Moves",
        "",
        "| started (s) | finished (s) | cycle | bundle | from → to |",
        "|---|---|---|---|---|",
    ]
    for m in moves:
        finished = f"{t_of(m['finished_ms']):.1f}" if m["finished_ms"] is not None else "not finished"
        lines.append(f"| {t_of(m['started_ms']):.1f} | {finished} | {cycle_of(m['started_ms']) or '-'} | "
                     f"`{m['bundle']}` | {m['from']} → {m['to']} |")
    if not moves:
        lines.append("| - | - | - | no move | - |")
    lines += ["", "## Shedding cycles (the controller's view)", "",
              "| cycle | at (s) | load per broker, KiB/s (score %) | planned moves (outcome) |", "|---|---|---|---|"]
    for at in all_cycles:
        cycle = sampler.cycles[at]
        number = cycles.index(at) + 1 if at in cycles else "-"
        brokers = ", ".join(f"{b['broker']}: {b['load_bytes_per_second'] / 1024:,.0f} ({b['score_pct']:.0f})"
                            for b in sorted(cycle.get("brokers", []), key=lambda b: b["broker"]))
        planned = "; ".join(f"{m['bundle']} {m['from']} → {m['to']} ({m['outcome']})" for m in cycle.get("moves", []))
        lines.append(f"| {number} | {t_of(at):.1f} | {brokers or 'no load'} | {planned or 'none'} |")
    lines += ["", "## Clients", "",
              f"{sum(w.sent for w in writers):,} records sent, {outcome['acked_total']:,} acknowledged, "
              f"{sum(failed.values())} failed deliveries, {unfinished} still undelivered at the flush "
              f"({FLUSH_TIMEOUT_S} s), {sum(w.queue_full for w in writers)} full-queue waits.",
              "",
              "| error | retried by the client | failed deliveries | client errors (error_cb) | allowed |",
              "|---|---|---|---|---|"]
    for name in sorted(set(retried) | set(failed) | set(client_errors)):
        lines.append(f"| {name} | {retried.get(name, 0)} | {failed.get(name, 0)} | {client_errors.get(name, 0)} | "
                     f"{'yes' if name in ALLOWED_ERRORS else 'no'} |")
    if not (retried or failed or client_errors):
        lines.append("| none | 0 | 0 | 0 | |")
    lines += [
        "",
        "Retried errors are read from librdkafka's own log (debug context `msg`: each produce batch that "
        "came back with an error and was retried); failed deliveries reached the application. Allowed: "
        + ", ".join(sorted(ALLOWED_ERRORS)) + " (what a moving leadership answers, docs/design/cluster.md §5.6).",
    ]
    if client_log.warnings:
        lines += ["", "Client warnings: " + "; ".join(f"{c}× {html.escape(t)}" for t, c in client_log.warnings.most_common(5))]
    lines += [
        "",
        "## Acknowledged records",
        "",
        f"Read back {outcome['read']:,} records from the final leaders; acknowledged {outcome['acked_total']:,}; "
        f"lost {len(lost)}" + (f" (first: {lost[:5]})" if lost else "")
        + f"; ids read more than once: {outcome['duplicates']}.",
    ]
    if sampler.errors:
        lines += ["", f"Samples that failed (and were skipped): {dict(sampler.errors)}, last: `{sampler.last_error}`."]
    return "\n".join(lines) + "\n", svg, any_missed


if __name__ == "__main__":
    sys.exit(main())
