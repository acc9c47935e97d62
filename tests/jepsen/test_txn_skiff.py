"""The short transactional run of CI: the transactional workload (txn_workload.py) for CI_SECONDS
against 3 Skiff brokers and their own etcd on 127.0.0.1, with leader kills and pauses past the
broker session scheduled by a fixed seed (SKIFF_JEPSEN_TXN_SEED overrides it), then the final
read; 0 of every anomaly Kafka's model forbids (txn_checker.py). It needs what test_queue_skiff.py
needs (the release broker with etcd, or SKIFF_BIN; etcd on the PATH). The long runs are
`python3 tests/jepsen/run.py --workload txn --minutes N --seed S` (README.md)."""

import os
import time

from checker import table_header
from run import run_workload
from targets import SkiffTarget

# Seed 6 schedules a leader kill first and then a pause, as in the queue's CI run (the scheduler's
# choices depend only on the seed).
SEED = int(os.environ.get("SKIFF_JEPSEN_TXN_SEED", "6"))
CI_SECONDS = 40
FAULT_INTERVAL_S = 10.0
WALL_BUDGET_S = 90
# A small share of consume-transform-produce transactions (send_offsets_to_transaction).
CTP_SHARE = 0.15


def test_transactions_under_leader_kills_and_pauses_show_no_forbidden_anomaly(tmp_path):
    started = time.monotonic()
    target = SkiffTarget()
    try:
        result = run_workload(target, SEED, CI_SECONDS, ["kill", "pause"], tmp_path / "history.jsonl",
                              workload="txn", fault_interval_s=FAULT_INTERVAL_S, rate_per_s=10, ctp_share=CTP_SHARE)
    finally:
        target.stop()
    wall = time.monotonic() - started
    report = result.report
    print(f"{table_header(report.classes)}\n{result.row}\nfaults {result.faults}, wall {wall:.0f} s\n"
          f"{dict(report.figures)}")
    assert {name for name, _ in result.faults} == {"kill", "pause"}, result.faults
    assert result.final_read, "the final read did not reach every partition's end"
    figures = report.figures
    assert figures["txns_committed"] > 50 and figures["txns_aborted"] > 5 and figures["txn_reads"] > 10, figures
    assert report.forbidden == 0, (report.counts, dict(report.examples))
    assert not result.client_errors, result.client_errors
    assert wall < WALL_BUDGET_S, wall
