"""Kafka's `kafka-transactions.sh` (org.apache.kafka.tools.TransactionsCommand, the tools of
tests/clients/java/pom.xml, run in one JVM by skiff.ToolRunner) against transactions on one node
(issue 38): a producer commits one transaction, begins a second with a long
transaction.timeout.ms and is SIGKILLed mid-transaction (tests/clients/java/src/skiff/TxnHang.java),
leaving it open and holding the last stable offset. Then:

- `list` shows the killed producer's transactional id Ongoing, and with
  `--transactional-id-pattern` only ids the pattern matches whole;
- `describe` shows the killed producer's transaction Ongoing on the topic's partition;
- `describe-producers` shows the producer with its open transaction's start offset;
- `find-hanging` reports none (the coordinator knows the transaction: it is open, not hanging);
- `abort --start-offset` ends it: read_committed reads past it, `describe-producers` shows no open
  transaction, and `find-hanging` over every partition of the broker finds none.

With SKIFF_ECO_KAFKA_LIBS set to Apache Kafka 4.1.1's jars the same test runs against Kafka
(ecosystem.py), the check of the test itself."""

import os
import re
import signal
import tempfile

import pytest
from confluent_kafka import Consumer, TopicPartition

from ecosystem import JavaProcess, admin, SingleNode, create_topic, wait_for
from java_programs import classpath, run_tools

TOOL = "org.apache.kafka.tools.TransactionsCommand"
TOPIC = "tools-txn"
RECORDS = 5
# Longer than the test: only the operator's abort ends the killed producer's transaction.
LONG_TIMEOUT_MS = 600_000
OPEN_WITHIN_S = 60
SETTLE_S = 20


def tools(bootstrap, classes, *commands):
    return run_tools(classes, [[TOOL, "--bootstrap-server", bootstrap, *command] for command in commands])


def table(output):
    """A tool's table (a header line, then rows, whitespace-separated) as [{column: value}]."""
    lines = [line.split() for line in output.strip().splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0]
    return [dict(zip(header, row)) for row in lines[1:]]


def end_offset(bootstrap, isolation):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tools-watermarks", "isolation.level": isolation})
    try:
        return consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[1]
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def target():
    node = SingleNode()
    yield node
    node.stop()


def test_list_describe_find_hanging_and_abort(target, java_classes):
    bootstrap = target.bootstrap
    create_topic(bootstrap, TOPIC)
    txn_id = f"tools-hang-{os.getpid()}"
    log = tempfile.NamedTemporaryFile(prefix="skiff-txnhang-", suffix=".log", delete=False).name
    producer = JavaProcess("skiff.TxnHang", [bootstrap, TOPIC, txn_id, LONG_TIMEOUT_MS, RECORDS],
                           f"{java_classes}:{classpath()}", log, jvm_options=())
    try:
        line = wait_for(lambda: producer.alive() and next((l for l in producer.lines if l.startswith("OPEN ")), None),
                        OPEN_WITHIN_S, "the transaction open")
    finally:
        producer.stop(signal.SIGKILL)
    start_offset = int(line.split()[2])
    assert start_offset == RECORDS + 1, line  # after the committed records and their marker
    high = end_offset(bootstrap, "read_uncommitted")
    assert high == start_offset + RECORDS
    assert end_offset(bootstrap, "read_committed") == start_offset, "the LSO is not at the open transaction"

    listed, matched, unmatched, described, producers, hanging = tools(
        bootstrap, java_classes, ["list"],
        ["list", "--transactional-id-pattern", "tools-hang-[0-9]+"],
        ["list", "--transactional-id-pattern", "tools-hang"],
        ["describe", "--transactional-id", txn_id],
        ["describe-producers", "--topic", TOPIC, "--partition", "0"],
        ["find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0"])
    for status, out, err in (listed, matched, unmatched, described, producers, hanging):
        assert status == 0, f"{out}\n{err}"
    rows = {row["TransactionalId"]: row for row in table(listed[1])}
    assert rows.get(txn_id, {}).get("TransactionState") == "Ongoing", listed[1]
    # ListTransactions v2 (KIP-1152): the pattern matches whole ids.
    assert [row["TransactionalId"] for row in table(matched[1])] == [txn_id], matched[1]
    assert table(unmatched[1]) == [], unmatched[1]
    row = table(described[1])[0]
    assert row["TransactionalId"] == txn_id and row["TransactionState"] == "Ongoing", described[1]
    assert f"{TOPIC}-0" in described[1], described[1]
    open_producers = [r for r in table(producers[1]) if r.get("CurrentTransactionStartOffset") == str(start_offset)]
    assert len(open_producers) == 1 and open_producers[0]["ProducerId"] == row["ProducerId"], producers[1]
    assert not hanging_rows(hanging[1]), hanging[1]

    aborted, = tools(bootstrap, java_classes, ["abort", "--topic", TOPIC, "--partition", "0",
                                                "--start-offset", str(start_offset)])
    assert aborted[0] == 0, f"{aborted[1]}\n{aborted[2]}"
    wait_for(lambda: end_offset(bootstrap, "read_committed") == end_offset(bootstrap, "read_uncommitted") > high,
             SETTLE_S, "the LSO past the aborted transaction (its marker written)")
    # Every partition of the broker (the transaction state's and the offsets' too) searched.
    node_id = next(iter(admin(bootstrap).list_topics(timeout=10).brokers))
    producers, hanging = tools(bootstrap, java_classes, ["describe-producers", "--topic", TOPIC, "--partition", "0"],
                               ["find-hanging", "--broker-id", str(node_id), "--max-transaction-timeout", "0"])
    assert producers[0] == 0 and hanging[0] == 0, (producers, hanging)
    assert all(r.get("CurrentTransactionStartOffset") in ("None", "-1") for r in table(producers[1])), producers[1]
    assert not hanging_rows(hanging[1]), hanging[1]


def hanging_rows(output):
    """find-hanging's table rows (it prints only the header when there is none)."""
    return [row for row in table(output) if re.fullmatch(r"\d+", row.get("ProducerId", ""))]
