"""kafka-clients 4.x Admin calls and Kafka's tools for the admin APIs of issue 14 item 4
(CreatePartitions, IncrementalAlterConfigs, DeleteRecords, DeleteGroups, OffsetDelete,
DescribeLogDirs, ListPartitionReassignments). They were written before Skiff had these APIs and
expected UNSUPPORTED_VERSION; every one has landed, so they run as ordinary tests."""

import json
import re

import pytest

from java_programs import AdminApiMissing, run_program, run_tools

@pytest.fixture(scope="module")
def pending_run(java_classes, tmp_path_factory):
    from conftest import Broker

    broker = Broker(str(tmp_path_factory.mktemp("skiff-java-pending")), ("group.initial.rebalance.delay.ms=0",)).start()
    try:
        yield run_program(java_classes, "skiff.AdminPending", broker.bootstrap, "java-pending")
    finally:
        broker.stop()


@pytest.mark.parametrize("check", [
    "create_partitions",
    "incremental_alter_configs",
    "delete_records",
    "offset_delete",
    "delete_groups",
    "describe_log_dirs",
    "list_partition_reassignments",
])
def test_admin_client_pending(pending_run, check):
    pending_run.expect_pass(check)


# --- Kafka's tools over the same APIs ------------------------------------------------------------

TOOLS_NODE_ID = 7
TOOLS_TOPIC = "pending-tools"
TOOLS_GROUP = "pending-tools-group"
TOOLS_RECORDS = 100


@pytest.fixture(scope="module")
def pending_tool_runs(java_classes, tmp_path_factory):
    from conftest import Broker
    from test_java_tools import CONFIGS, CONSUMER_PERF, GROUPS, PRODUCER_PERF, TOPICS

    work = tmp_path_factory.mktemp("skiff-pending-tools")
    broker = Broker(str(work / "data"), (f"node.id={TOOLS_NODE_ID}", "group.initial.rebalance.delay.ms=0")).start()
    offsets_file = work / "delete-records.json"
    offsets_file.write_text(json.dumps(
        {"version": 1, "partitions": [{"topic": TOOLS_TOPIC, "partition": 0, "offset": 10}]}))
    bs = ["--bootstrap-server", broker.bootstrap]
    commands = {
        "create": [TOPICS, *bs, "--create", "--topic", TOOLS_TOPIC, "--partitions", 1, "--replication-factor", 1],
        "producer_perf": [PRODUCER_PERF, "--topic", TOOLS_TOPIC, "--num-records", TOOLS_RECORDS, "--record-size", 100,
                          "--throughput", -1, "--producer-props", f"bootstrap.servers={broker.bootstrap}"],
        "consumer_perf": [CONSUMER_PERF, *bs, "--topic", TOOLS_TOPIC, "--messages", TOOLS_RECORDS,
                          "--group", TOOLS_GROUP, "--timeout", 30000],
        "alter_partitions": [TOPICS, *bs, "--alter", "--topic", TOOLS_TOPIC, "--partitions", 3],
        "describe_after_alter": [TOPICS, *bs, "--describe", "--topic", TOOLS_TOPIC],
        "alter_config": [CONFIGS, *bs, "--alter", "--entity-type", "topics", "--entity-name", TOOLS_TOPIC,
                         "--add-config", "retention.ms=7200000"],
        "describe_config": [CONFIGS, *bs, "--describe", "--entity-type", "topics", "--entity-name", TOOLS_TOPIC],
        "delete_records": ["org.apache.kafka.tools.DeleteRecordsCommand", *bs, "--offset-json-file", offsets_file],
        "log_dirs": ["org.apache.kafka.tools.LogDirsCommand", *bs, "--describe", "--broker-list", TOOLS_NODE_ID],
        "delete_offsets": [GROUPS, *bs, "--delete-offsets", "--group", TOOLS_GROUP, "--topic", f"{TOOLS_TOPIC}:0"],
        "delete_group": [GROUPS, *bs, "--delete", "--group", TOOLS_GROUP],
        "list_groups": [GROUPS, *bs, "--list"],
    }
    try:
        runs = run_tools(java_classes, list(commands.values()))
    finally:
        broker.stop()
    return dict(zip(commands, runs))


# How the tools say that the broker answered UNSUPPORTED_VERSION (ConfigCommand words it itself).
UNSUPPORTED = re.compile(r"UnsupportedVersionException|API is not supported by the cluster")


def tool_ok(runs, name):
    status, out, err = runs[name]
    if UNSUPPORTED.search(out + err):
        raise AdminApiMissing(f"{name}: {(out + err)[:400]}")
    assert status == 0, f"{name} exited {status}:\n{out}\n{err}"
    return out


def test_kafka_topics_alter_partitions(pending_tool_runs):
    tool_ok(pending_tool_runs, "create")
    tool_ok(pending_tool_runs, "alter_partitions")
    describe = tool_ok(pending_tool_runs, "describe_after_alter")
    assert re.search(r"PartitionCount: 3\b", describe), describe


def test_kafka_configs_alter(pending_tool_runs):
    assert f"Completed updating config for topic {TOOLS_TOPIC}." in tool_ok(pending_tool_runs, "alter_config")
    describe = tool_ok(pending_tool_runs, "describe_config")
    assert re.search(r"^\s+retention\.ms=7200000 ", describe, re.M), describe


def test_kafka_delete_records(pending_tool_runs):
    out = tool_ok(pending_tool_runs, "delete_records")
    assert re.search(rf"partition: {TOOLS_TOPIC}-0\s+low_watermark: 10", out), out


def test_kafka_log_dirs(pending_tool_runs):
    out = tool_ok(pending_tool_runs, "log_dirs")
    described = json.loads(out.strip().splitlines()[-1])
    (broker,) = described["brokers"]
    assert broker["broker"] == TOOLS_NODE_ID, described
    partitions = [p for log_dir in broker["logDirs"] for p in log_dir["partitions"]]
    assert any(p["partition"] == f"{TOOLS_TOPIC}-0" and p["size"] > 0 for p in partitions), described


def test_kafka_consumer_groups_delete(pending_tool_runs):
    tool_ok(pending_tool_runs, "consumer_perf")
    tool_ok(pending_tool_runs, "delete_offsets")
    out = tool_ok(pending_tool_runs, "delete_group")
    assert f"Deletion of requested consumer groups ('{TOOLS_GROUP}') was successful." in out, out
    assert TOOLS_GROUP not in tool_ok(pending_tool_runs, "list_groups").split()
