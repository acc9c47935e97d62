"""Apache Kafka's Java client 4.x with transactions (issue 38), single node and 3 brokers:
commit and abort seen exactly by read_committed and read_uncommitted consumers, an open
transaction holding read_committed at the last stable offset, consume-transform-produce with
sendOffsetsToTransaction (the group's committed offsets move only with the commit), and a zombie
fenced by a second producer with the same transactional.id
(tests/clients/java/src/skiff/Transactions.java, one JVM per target, one RESULT line per check).

With SKIFF_ECO_KAFKA_LIBS set to Apache Kafka 4.1.1's jars the same checks run against Kafka
(ecosystem.py): that run checks the test itself."""

import os

import pytest

from conftest import SUMMARY_LINES
from ecosystem import TARGET_NAME, SingleNode, three_brokers
from java_programs import run_program

CHECKS = ["commit-abort", "open-transaction-holds-read-committed", "consume-transform-produce", "zombie-fenced"]


def _run(bootstrap, replicas, java_classes, prefix):
    return run_program(java_classes, "skiff.Transactions", bootstrap, replicas, f"{prefix}-{os.getpid()}")


@pytest.fixture(scope="module")
def single_run(java_classes):
    target = SingleNode()
    try:
        yield _run(target.bootstrap, 1, java_classes, "txn1")
    except Exception:
        print(target.log_tail(80))
        raise
    finally:
        target.stop()


@pytest.fixture(scope="module")
def cluster_run(java_classes, etcd):
    cluster = three_brokers(etcd)
    try:
        yield _run(cluster.bootstrap, 3, java_classes, "txn3")
    finally:
        cluster.stop()


@pytest.mark.parametrize("check", CHECKS)
def test_single_node(single_run, check):
    single_run.expect_pass(check)


@pytest.mark.parametrize("check", CHECKS)
def test_three_brokers(cluster_run, check):
    cluster_run.expect_pass(check)
    if check == CHECKS[-1]:
        fenced = " ".join(line.split()[-1] for line in cluster_run.stdout.splitlines() if line.startswith("NOTE zombie"))
        SUMMARY_LINES.append(f"java transactions on {TARGET_NAME}: every check passed on 3 brokers; the zombie "
                             f"failed with {fenced}")
