"""Apache Kafka's Java client, kafka-clients 4.x (tests/clients/java/pom.xml pins the version),
against Skiff: an idempotent acks=all producer with every codec, a classic-protocol consumer group
with commits and two rebalances, and the Admin client over the admin APIs Skiff has. Each program
runs in one JVM per module; each test asserts one of its checks."""

import pytest

from java_programs import run_program

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
RECORDS_PER_CODEC = 400
GROUP_RECORDS_PER_PARTITION = 20
# Members join at once; the default 3 s initial delay would only slow the test.
GROUP_SETTINGS = ("group.initial.rebalance.delay.ms=0",)


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory):
    from conftest import Broker

    broker = Broker(str(tmp_path_factory.mktemp("skiff-java")), GROUP_SETTINGS).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def producer_run(java_classes, module_broker):
    return run_program(java_classes, "skiff.IdempotentCodecs", module_broker.bootstrap, "java-idem", RECORDS_PER_CODEC)


@pytest.fixture(scope="module")
def admin_run(java_classes, module_broker):
    return run_program(java_classes, "skiff.AdminSupported", module_broker.bootstrap, "java-admin", "java-admin-group")


@pytest.mark.parametrize("codec", CODECS)
def test_idempotent_producer_reads_back_exactly(producer_run, codec):
    producer_run.expect_pass(f"idempotent_{codec}")


def test_classic_group_commits_and_rebalances(java_classes, module_broker):
    run = run_program(java_classes, "skiff.GroupRebalance", module_broker.bootstrap, "java-group", "java-group",
                      GROUP_RECORDS_PER_PARTITION)
    run.expect_pass("group_rebalance")


@pytest.mark.parametrize("check", [
    "describe_cluster",
    "create_topics",
    "list_topics",
    "describe_topics",
    "describe_configs",
    "describe_broker_configs",
    "list_offsets",
    "list_offsets_by_record_timestamp",
    "group_offsets_and_listing",
    "describe_group_after_leave",
    "delete_topics",
])
def test_admin_client(admin_run, check):
    admin_run.expect_pass(check)
