"""The short queue run of CI: the workload for CI_SECONDS against 3 Skiff brokers and their own
etcd on 127.0.0.1, with leader kills and pauses past the broker session scheduled by a fixed seed
(SKIFF_JEPSEN_SEED overrides it), then a final read; 0 of every anomaly Kafka's model forbids.
It needs the release broker with etcd (`cargo build --release -p skiff-broker --features etcd`,
or SKIFF_BIN) and etcd on the PATH, as the cluster tests of tests/clients do. The long runs are
`python3 tests/jepsen/run.py --minutes N --seed S` (README.md)."""

import os
import time

from checker import TABLE_HEADER
from run import run_queue
from targets import SkiffTarget

# Seed 6 schedules a leader kill first and then a pause (the scheduler's choices depend only on it).
SEED = int(os.environ.get("SKIFF_JEPSEN_SEED", "6"))
CI_SECONDS = 45
FAULT_INTERVAL_S = 10.0
WALL_BUDGET_S = 180


def test_the_queue_under_leader_kills_and_pauses_shows_no_forbidden_anomaly(tmp_path):
    started = time.monotonic()
    target = SkiffTarget()
    try:
        result = run_queue(target, SEED, CI_SECONDS, ["kill", "pause"], tmp_path / "history.jsonl",
                           fault_interval_s=FAULT_INTERVAL_S, rate_per_s=30)
    finally:
        target.stop()
    wall = time.monotonic() - started
    print(f"{TABLE_HEADER}\n{result.row}\nfaults {result.faults}, wall {wall:.0f} s")
    report = result.report
    assert {name for name, _ in result.faults} == {"kill", "pause"}, result.faults
    assert result.final_read, "the final read did not reach every partition's end"
    assert report.figures["sends_ok"] > 500 and report.figures["records_read"] > 0, report.figures
    assert report.forbidden == 0, (report.counts, dict(report.examples))
    assert not result.client_errors, result.client_errors
    assert wall < WALL_BUDGET_S, wall
