"""Consumer groups against Skiff with real clients: legacy members (kafka-node's ConsumerGroup on
the v0 group APIs, kafka-python forced to 0.10.1), modern members (kafka-python, confluent-kafka),
two members splitting partitions and taking over when one leaves or is killed, and committed
offsets surviving a broker restart."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from clients import (
    GROUP_SESSION_MS, ck_group_consumer, ck_group_poll, ck_produce, kp_group_consumer,
    kp_group_poll, kp_produce, node,
)
from conftest import messages

TAKEOVER_TIMEOUT_S = 30


def committed(bootstrap, group, topic, partition=0, api_version=None):
    """The group's committed offset of one partition, read with OffsetFetch."""
    kwargs = {"bootstrap_servers": bootstrap, "group_id": group, "enable_auto_commit": False}
    if api_version is not None:
        kwargs["api_version"] = api_version
    consumer = KafkaConsumer(**kwargs)
    try:
        return consumer.committed(TopicPartition(topic, partition))
    finally:
        consumer.close()


def test_kafka_node_consumer_group_consumes_and_commits(broker):
    msgs = messages(40, prefix="kn-group")
    kp_produce(broker.bootstrap, "kn-group", msgs, api_version=(0, 10, 1))
    out = node("group-consume", bootstrap=broker.bootstrap, topic="kn-group", group="kn-g",
               count=40, commit=True)
    seen = [(partition, offset, key, value) for partition, offset, key, value in out["messages"]]
    assert [(offset, key, value) for _, offset, key, value in seen] == [
        (index, key.decode(), value.decode()) for index, (key, value) in enumerate(msgs)
    ]
    # kafka-node commits the offset of the next message to read.
    assert committed(broker.bootstrap, "kn-g", "kn-group", api_version=(0, 10, 1)) == 40


def test_kafka_python_legacy_group_resumes_from_committed_offset(broker):
    msgs = messages(60, prefix="kp-legacy-group")
    kp_produce(broker.bootstrap, "kp-lg", msgs, api_version=(0, 10, 1))
    consumer = kp_group_consumer(broker.bootstrap, "kp-lg", "kp-lg-g", api_version=(0, 10, 1))
    first = kp_group_poll(consumer, 30)
    assert len(first) >= 30
    upto = first[29][1] + 1
    consumer.commit({TopicPartition("kp-lg", 0): OffsetAndMetadata(upto, "", -1)})
    consumer.close()
    assert committed(broker.bootstrap, "kp-lg-g", "kp-lg", api_version=(0, 10, 1)) == upto
    consumer = kp_group_consumer(broker.bootstrap, "kp-lg", "kp-lg-g", api_version=(0, 10, 1))
    rest = kp_group_poll(consumer, 60 - upto)
    consumer.close()
    assert [(offset, key, value) for _, offset, key, value in rest] == [
        (offset, key, value) for offset, (key, value) in enumerate(msgs)
    ][upto:]


def test_modern_groups_kafka_python_and_confluent(broker):
    msgs = messages(50, prefix="modern-group")
    kp_produce(broker.bootstrap, "mg", msgs)
    want = [(0, offset, key, value) for offset, (key, value) in enumerate(msgs)]

    consumer = kp_group_consumer(broker.bootstrap, "mg", "mg-kp")
    assert kp_group_poll(consumer, 50) == want
    consumer.commit()
    consumer.close()
    assert committed(broker.bootstrap, "mg-kp", "mg") == 50

    consumer = ck_group_consumer(broker.bootstrap, "mg", "mg-ck")
    assert ck_group_poll(consumer, 50) == want
    consumer.commit(asynchronous=False)
    consumer.close()
    assert committed(broker.bootstrap, "mg-ck", "mg") == 50


def assigned_partitions(consumer):
    consumer.poll(timeout_ms=200)
    return {tp.partition for tp in consumer.assignment()}


def wait_for_split(consumers, partitions, timeout_s=TAKEOVER_TIMEOUT_S):
    """Polls every consumer (each from its own thread, so that one member blocked in a rebalance
    never keeps the other from rejoining) until their assignments are disjoint and cover
    `partitions`."""
    owned = [set() for _ in consumers]
    stop = threading.Event()

    def poll(index, consumer):
        while not stop.is_set():
            owned[index] = assigned_partitions(consumer)

    threads = [threading.Thread(target=poll, args=(index, consumer), daemon=True)
               for index, consumer in enumerate(consumers)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            seen = [set(part) for part in owned]
            union = set().union(*seen)
            if union == partitions and sum(map(len, seen)) == len(partitions) and all(seen):
                return seen
            time.sleep(0.1)
        raise AssertionError(f"no split of {partitions}: {owned}")
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def test_two_members_split_partitions_and_take_over_after_leave(broker_factory):
    broker = broker_factory("num.partitions=4")
    kp_produce(broker.bootstrap, "split", messages(8, prefix="split"))
    first = kp_group_consumer(broker.bootstrap, "split", "split-g")
    second = kp_group_consumer(broker.bootstrap, "split", "split-g")
    owned = wait_for_split([first, second], {0, 1, 2, 3})
    assert all(len(part) == 2 for part in owned)
    second.close()  # LeaveGroup: the survivor gets everything at the next rebalance
    wait_for_split([first], {0, 1, 2, 3})
    first.close()


MEMBER_SCRIPT = """
import json, sys, time
sys.path.insert(0, {clients_dir!r})
from clients import kp_group_consumer
consumer = kp_group_consumer({bootstrap!r}, "killed", "killed-g")
while True:
    consumer.poll(timeout_ms=200)
    print(json.dumps(sorted(tp.partition for tp in consumer.assignment())), flush=True)
"""


def test_member_killed_is_expelled_after_its_session_and_the_other_takes_over(broker_factory):
    broker = broker_factory("num.partitions=2")
    kp_produce(broker.bootstrap, "killed", messages(4, prefix="killed"))
    script = MEMBER_SCRIPT.format(
        clients_dir=os.path.dirname(os.path.abspath(__file__)), bootstrap=broker.bootstrap)
    victim = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TAKEOVER_TIMEOUT_S
        while time.monotonic() < deadline:
            if json.loads(victim.stdout.readline() or "[]") == [0, 1]:
                break
        else:
            raise AssertionError("the first member never got both partitions")
        survivor = kp_group_consumer(broker.bootstrap, "killed", "killed-g")
        # Both members share the partitions while the victim lives.
        owned = None
        deadline = time.monotonic() + TAKEOVER_TIMEOUT_S
        while time.monotonic() < deadline:
            owned = assigned_partitions(survivor)
            if len(owned) == 1:
                break
        assert owned is not None and len(owned) == 1, owned
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        killed_at = time.monotonic()
        wait_for_split([survivor], {0, 1})
        # Not before the session timeout (no LeaveGroup was sent), not much after it.
        assert time.monotonic() - killed_at >= GROUP_SESSION_MS / 1000 - 1
        survivor.close()
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()


def test_committed_offsets_survive_a_restart(broker):
    kp_produce(broker.bootstrap, "durable", messages(20, prefix="durable"))
    consumer = kp_group_consumer(broker.bootstrap, "durable", "durable-g")
    assert len(kp_group_poll(consumer, 20)) == 20
    consumer.commit({TopicPartition("durable", 0): OffsetAndMetadata(13, "meta", -1)})
    consumer.close()
    broker.restart()
    assert committed(broker.bootstrap, "durable-g", "durable") == 13
    consumer = kp_group_consumer(broker.bootstrap, "durable", "durable-g")
    rest = kp_group_poll(consumer, 7)
    consumer.close()
    assert [offset for _, offset, _, _ in rest] == list(range(13, 20))


def test_committed_offsets_survive_a_crash(broker):
    kp_produce(broker.bootstrap, "crash", messages(5, prefix="crash"))
    consumer = kp_group_consumer(broker.bootstrap, "crash", "crash-g")
    assert len(kp_group_poll(consumer, 5)) == 5
    consumer.commit({TopicPartition("crash", 0): OffsetAndMetadata(4, "", -1)})
    consumer.close()
    port = broker.port
    broker.stop(signal.SIGKILL)
    broker.start(port=port)
    assert committed(broker.bootstrap, "crash-g", "crash") == 4


def test_confluent_idempotent_producer(broker):
    msgs = messages(200, prefix="idem")
    assert ck_produce(broker.bootstrap, "idem", msgs, **{"enable.idempotence": True}) == 200
    consumer = ck_group_consumer(broker.bootstrap, "idem", "idem-g")
    seen = ck_group_poll(consumer, 200)
    consumer.close()
    assert seen == [(0, offset, key, value) for offset, (key, value) in enumerate(msgs)]


@pytest.mark.parametrize("release", ["0.10.0", "0.10.1", "0.10.2", "0.11.0"])
def test_groups_work_under_every_advertised_release_cap(broker_factory, release):
    """Kafka has had the group APIs since 0.9: capping ApiVersions to an old release must leave
    them advertised, so clients that negotiate from ApiVersions still join, consume and commit."""
    broker = broker_factory(f"skiff.advertised.kafka.version={release}")
    topic = f"capped-{release.replace('.', '-')}"
    msgs = messages(30, prefix=topic)
    ck_produce(broker.bootstrap, topic, msgs)
    want = [(0, offset, key, value) for offset, (key, value) in enumerate(msgs)]

    consumer = ck_group_consumer(broker.bootstrap, topic, f"{topic}-ck")
    assert ck_group_poll(consumer, 30) == want
    consumer.commit(asynchronous=False)
    consumer.close()
    assert committed(broker.bootstrap, f"{topic}-ck", topic) == 30

    consumer = kp_group_consumer(broker.bootstrap, topic, f"{topic}-kp")
    assert kp_group_poll(consumer, 30) == want
    consumer.commit()
    consumer.close()
    assert committed(broker.bootstrap, f"{topic}-kp", topic) == 30
