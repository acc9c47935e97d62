"""Cluster membership and the controller on a real 3-member etcd (issue 15): brokers register under
their session lease, one controller is elected, a killed controller is replaced within the session
timeout + 5 s, a duplicate node.id is refused, an unreachable etcd stops the start with a clear
error, and losing one etcd member disturbs nothing. Brokers run with a 3 s session."""

import itertools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient

from conftest import BROKER_BIN, SUMMARY_LINES, Broker

SESSION_MS = 3000
FAILOVER_BOUND_S = SESSION_MS / 1000 + 5
METRICS = re.compile(r"skiff metrics on (\S+)")
_names = itertools.count()


class SkiffCluster:
    """N brokers of one cluster (own name in the shared etcd), each with its own data directory."""

    def __init__(self, etcd, size, settings=()):
        self.etcd = etcd
        self.name = f"t{os.getpid()}-{next(_names)}"
        self.dirs = [tempfile.mkdtemp(prefix="skiff-cluster-") for _ in range(size)]
        self.brokers = [self._broker(node_id, self.dirs[node_id], settings)
                        for node_id in range(size)]

    def _broker(self, node_id, data_dir, extra=(), host="127.0.0.1", command_prefix=()):
        return Broker(data_dir, [
            f"node.id={node_id}",
            f"skiff.metadata.store={self.etcd.address}",
            f"skiff.cluster.name={self.name}",
            f"broker.session.timeout.ms={SESSION_MS}",
            f"skiff.metrics.listener={host}:0",
            *extra,
        ], command_prefix=command_prefix, listen_host=host)

    def start(self):
        for broker in self.brokers:
            broker.start()
        return self

    def stop(self):
        for broker in self.brokers:
            if broker.alive():
                broker.stop()
        for data_dir in self.dirs:
            shutil.rmtree(data_dir, ignore_errors=True)

    def running(self):
        return [b for b in self.brokers if b.alive()]


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def dump_logs(cluster):
    """Prints every broker's log (colours stripped) when SKIFF_TEST_DUMP_LOGS is set."""
    if os.environ.get("SKIFF_TEST_DUMP_LOGS"):
        for index, broker in enumerate(cluster.brokers):
            print(f"=== broker {index}\n" + ANSI.sub("", "".join(broker.log_lines)))


def metrics(broker):
    # The last start's endpoint: a restarted broker appends to the same log lines.
    address = [METRICS.search(line).group(1) for line in broker.log_lines if METRICS.search(line)][-1]
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line and not line.startswith("#")}


def controller_seen_by(broker):
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    return metadata.controller_id, metadata.cluster_id


def wait_for(condition, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"{what} not within {timeout_s} s (last: {last})")


@pytest.fixture
def cluster3(etcd):
    cluster = SkiffCluster(etcd, 3).start()
    yield cluster
    cluster.stop()


def agreed_controller(cluster):
    """The controller id every running broker reports, once they agree on a real one."""
    def agreed():
        seen = {controller_seen_by(b) for b in cluster.running()}
        return seen if len(seen) == 1 and next(iter(seen))[0] >= 0 else None

    return next(iter(wait_for(agreed, 10, "one controller seen by every broker")))


def test_brokers_register_and_agree_on_one_controller_and_cluster_id(cluster3):
    controller, cluster_id = agreed_controller(cluster3)
    assert controller in (0, 1, 2)
    assert len(cluster_id) == 22, cluster_id
    # Agreeing on the controller says nothing of the registrations that came after it: each
    # broker's image converges through its watch.
    wait_for(lambda: all(metrics(b)["skiff_cluster_brokers"] == 3 for b in cluster3.brokers), 10, "3 brokers in every image")
    for broker in cluster3.brokers:
        figures = metrics(broker)
        assert figures["skiff_cluster_brokers"] == 3
        assert figures["skiff_cluster_controller"] == (1 if broker is cluster3.brokers[controller] else 0)
        assert figures["skiff_cluster_session_alive"] == 1


def test_a_killed_controller_is_replaced_within_the_session_timeout(cluster3):
    controller, _ = agreed_controller(cluster3)
    old = cluster3.brokers[controller]
    survivors = [b for b in cluster3.brokers if b is not old]
    killed_at = time.monotonic()
    old.stop(signal.SIGKILL)

    def successor():
        ids = {controller_seen_by(b)[0] for b in survivors}
        return ids if len(ids) == 1 and next(iter(ids)) not in (controller, -1) else None

    new = next(iter(wait_for(successor, FAILOVER_BOUND_S, "a new controller")))
    failover_s = time.monotonic() - killed_at
    SUMMARY_LINES.append(f"cluster: controller failover after SIGKILL took {failover_s:.2f} s "
                         f"(session {SESSION_MS} ms; bound {FAILOVER_BOUND_S} s)")
    assert new != controller
    assert sum(metrics(b)["skiff_cluster_controller"] for b in survivors) == 1
    for broker in survivors:
        assert metrics(broker)["skiff_cluster_brokers"] == 2
    # The killed broker comes back on its own data directory before its old lease could expire
    # (its registration is gone already here, so this is a plain return to the cluster).
    old.start()
    wait_for(lambda: all(metrics(b)["skiff_cluster_brokers"] == 3 for b in cluster3.brokers), 10, "3 brokers again")


def test_a_restart_right_after_kill_replaces_its_own_stale_registration(cluster3):
    agreed_controller(cluster3)
    victim = cluster3.brokers[1]
    victim.stop(signal.SIGKILL)
    restarted_at = time.monotonic()
    victim.start()  # at once: the old lease is still alive in etcd
    took = time.monotonic() - restarted_at
    assert took < SESSION_MS / 1000, f"waited out the old session ({took:.2f} s) instead of replacing it"
    assert any("replacing this directory's stale registration" in line for line in victim.log_lines), victim.log_lines[-20:]
    wait_for(lambda: all(metrics(b)["skiff_cluster_brokers"] == 3 for b in cluster3.brokers), 10, "3 brokers again")


def test_a_live_node_id_from_another_data_directory_is_refused(etcd, cluster3):
    impostor_dir = tempfile.mkdtemp(prefix="skiff-cluster-")
    try:
        impostor = cluster3._broker(1, impostor_dir)
        with pytest.raises(RuntimeError) as exited:
            impostor.start()
        log = str(exited.value)
        assert "node.id 1 is already registered by a live broker with another data directory" in log, log
        assert impostor.process.wait(10) != 0
    finally:
        shutil.rmtree(impostor_dir, ignore_errors=True)


def test_an_unreachable_etcd_stops_the_start_with_a_message_naming_it():
    data_dir = tempfile.mkdtemp(prefix="skiff-cluster-")
    try:
        started = time.monotonic()
        result = subprocess.run(
            [BROKER_BIN, "serve", "--set", f"log.dirs={data_dir}", "--set", "listeners=PLAINTEXT://127.0.0.1:0",
             "--set", "node.id=1", "--set", "skiff.metadata.store=etcd://127.0.0.1:1,127.0.0.1:2",
             "--set", "skiff.metadata.start.timeout.ms=2000"],
            capture_output=True, text=True, timeout=60,
        )
        waited = time.monotonic() - started
        output = result.stdout + result.stderr
        assert result.returncode != 0, output
        assert "etcd://127.0.0.1:1,127.0.0.1:2" in output and "unreachable" in output, output
        assert waited < 30, waited
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def test_a_shared_store_needs_an_explicit_node_id():
    result = subprocess.run(
        [BROKER_BIN, "serve", "--set", "listeners=PLAINTEXT://127.0.0.1:0",
         "--set", "skiff.metadata.store=etcd://127.0.0.1:1"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode != 0
    assert "node.id" in result.stdout + result.stderr, result.stdout + result.stderr


def test_losing_one_etcd_member_deregisters_no_broker(etcd, cluster3):
    wait_for(lambda: all(metrics(b)["skiff_cluster_brokers"] == 3 for b in cluster3.brokers), 10, "3 brokers")
    controller, _ = agreed_controller(cluster3)
    etcd.kill(2)
    try:
        # Two session timeouts with one member gone: every session must survive.
        time.sleep(2 * SESSION_MS / 1000)
        for broker in cluster3.brokers:
            figures = metrics(broker)
            assert figures["skiff_cluster_brokers"] == 3, figures
            assert figures["skiff_cluster_sessions_lost_total"] == 0, figures
            assert figures["skiff_cluster_session_alive"] == 1, figures
        assert controller_seen_by(cluster3.brokers[0])[0] == controller
    finally:
        etcd.start_member(2)
        etcd.wait_healthy(2)


def test_a_broker_paused_past_its_session_registers_again(cluster3):
    wait_for(lambda: all(metrics(b)["skiff_cluster_brokers"] == 3 for b in cluster3.brokers), 10, "3 brokers")
    paused = cluster3.brokers[2]
    paused.process.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: metrics(cluster3.brokers[0])["skiff_cluster_brokers"] == 2, SESSION_MS / 1000 + 5,
                 "the paused broker's registration to expire")
    finally:
        paused.process.send_signal(signal.SIGCONT)
    wait_for(lambda: metrics(paused)["skiff_cluster_sessions_lost_total"] >= 1, 10, "the pause noticed")
    wait_for(lambda: all(metrics(b)["skiff_cluster_brokers"] == 3 for b in cluster3.brokers), 10, "registered again")
    assert metrics(paused)["skiff_cluster_session_alive"] == 1


def init_producer_id(bootstrap):
    """A raw InitProducerId v0 (non-transactional): no client library exposes the id it gets."""
    import socket
    import struct

    host, port = bootstrap.split(":")
    client_id = b"skiff-test"
    body = struct.pack(">hhih", 22, 0, 7, len(client_id)) + client_id + struct.pack(">hi", -1, 60000)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        answer = sock.recv(size, socket.MSG_WAITALL)
    correlation, _throttle, error, producer_id, epoch = struct.unpack(">iihqh", answer[:20])
    assert (correlation, error, epoch) == (7, 0, 0), (correlation, error, epoch)
    return producer_id


def test_producer_ids_are_unique_across_brokers_and_restarts(cluster3):
    agreed_controller(cluster3)
    ids = [init_producer_id(b.bootstrap) for b in cluster3.brokers for _ in range(3)]
    assert len(set(ids)) == len(ids), ids
    # Each broker takes its own block of 1000 from R/ids/producer_id_block.
    blocks = {producer_id // 1000 for producer_id in ids}
    assert len(blocks) == 3, ids
    restarted = cluster3.brokers[0]
    restarted.stop(signal.SIGKILL)
    restarted.start()
    after = init_producer_id(restarted.bootstrap)
    assert after not in ids and after // 1000 not in blocks, (after, ids)
