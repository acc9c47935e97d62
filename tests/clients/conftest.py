"""Fixtures for Skiff's real-client tests: each test gets its own broker process on 127.0.0.1 with a
port the broker picks itself (listeners on port 0) and a fresh data directory; the broker is stopped
with SIGTERM afterwards (and killed if it does not stop)."""

import os
import pathlib
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BROKER_BIN = os.environ.get("SKIFF_BIN", str(ROOT / "target" / "release" / "skiff"))
LISTENING = re.compile(r"skiff listening on (\S+):(\d+)")
LISTENER = re.compile(r"skiff listener (\S+) \((\S+)\) on (\S+):(\d+)")
# scripts/capture-frames.sh sets this to a directory: every broker a test starts then writes the
# request frames it receives there (skiff.frame.capture.dir), for the replay corpus in tests/corpus.
FRAME_CAPTURE_DIR = os.environ.get("SKIFF_TEST_FRAME_CAPTURE_DIR")
START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 20


class Broker:
    """A running `skiff serve` process."""

    def __init__(self, data_dir, extra_settings=(), command_prefix=(), listen_host="127.0.0.1"):
        self.data_dir = data_dir
        # The address the listener binds (the network-partition tests give each broker its own).
        self.listen_host = listen_host
        self.extra_settings = list(extra_settings)
        # Run before the broker binary, e.g. ["prlimit", "--nofile=512"] for a low file limit.
        self.command_prefix = list(command_prefix)
        self.process = None
        self.host = None
        self.port = None
        self.listeners = {}
        self.log_lines = []

    @property
    def bootstrap(self):
        return f"{self.host}:{self.port}"

    def start(self, port=0):
        args = self.command_prefix + [
            BROKER_BIN,
            "serve",
            "--set", f"log.dirs={self.data_dir}",
            "--set", f"listeners=PLAINTEXT://{self.listen_host}:{port}",
        ]
        for setting in self.extra_settings:
            args += ["--set", setting]
        if FRAME_CAPTURE_DIR:
            args += ["--set", f"skiff.frame.capture.dir={FRAME_CAPTURE_DIR}"]
        env = dict(os.environ, SKIFF_LOG=os.environ.get("SKIFF_LOG", "info"))
        self.process = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("broker exited during start:\n" + "".join(self.log_lines))
            self.log_lines.append(line)
            listener = LISTENER.search(line)
            if listener:
                self.listeners[listener.group(1)] = f"{listener.group(3)}:{listener.group(4)}"
            match = LISTENING.search(line)
            if match:
                self.host, self.port = match.group(1), int(match.group(2))
                threading.Thread(target=self._drain, daemon=True).start()
                return self
        raise RuntimeError("broker did not start:\n" + "".join(self.log_lines))

    def _drain(self):
        for line in self.process.stdout:
            self.log_lines.append(line)

    def stop(self, sig=signal.SIGTERM):
        if self.process is None:
            return None
        self.process.send_signal(sig)
        try:
            code = self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.process = None
        return code

    def restart(self):
        """Stops gracefully and starts again on the same port and data."""
        port = self.port
        self.stop()
        return self.start(port=port)

    def alive(self):
        return self.process is not None and self.process.poll() is None


@pytest.fixture
def broker_factory():
    brokers = []
    dirs = []

    def make(*settings):
        data_dir = tempfile.mkdtemp(prefix="skiff-test-")
        dirs.append(data_dir)
        broker = Broker(data_dir, settings).start()
        brokers.append(broker)
        return broker

    yield make
    for broker in brokers:
        alive = broker.alive()
        code = broker.stop()
        if os.environ.get("SKIFF_TEST_DUMP_LOGS"):
            print("".join(broker.log_lines))
        elif alive and code not in (0, None):
            print("".join(broker.log_lines[-50:]))
    for data_dir in dirs:
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def broker(broker_factory):
    return broker_factory()


def messages(count, prefix="m", value_bytes=100):
    """Deterministic (key, value) pairs."""
    out = []
    for index in range(count):
        key = f"{prefix}-key-{index}".encode()
        body = f"{prefix}-value-{index}-".encode()
        value = (body * (value_bytes // len(body) + 1))[:value_bytes]
        out.append((key, value))
    return out


# Ports free_port hands out: below the kernel's ephemeral range (32768 and up by default, where
# `port 0` listeners such as the brokers' and every outgoing connection take theirs, so a port
# handed out here cannot be taken by a connection before its server binds it), split between the
# pytest-xdist workers (two test files run side by side) and walked in order, so no two workers
# and no two calls of one process hand out the same port. Each is checked bindable first.
FREE_PORTS_FIRST = 10000
FREE_PORTS_END = 32000
_next_free_port = None


def _worker_port_range():
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    span = (FREE_PORTS_END - FREE_PORTS_FIRST) // count
    first = FREE_PORTS_FIRST + (index % count) * span
    return first, first + span


def free_port():
    global _next_free_port
    first, end = _worker_port_range()
    if _next_free_port is None or not first <= _next_free_port < end:
        # A random start: a second copy of this module (imported by another name) walks elsewhere.
        _next_free_port = random.randrange(first, end)
    for _ in range(end - first):
        port = _next_free_port
        _next_free_port = first if port + 1 >= end else port + 1
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {first}-{end}")


@pytest.fixture(scope="session")
def etcd():
    """One 3-member etcd cluster for the whole session, shared by every cluster test (each
    cluster of brokers takes its own `skiff.cluster.name`, so their keys never meet)."""
    from etcd_cluster import EtcdCluster

    cluster = EtcdCluster().start()
    yield cluster
    cluster.stop()


# Lines a test wants shown even when it passes and output is captured (the crash test's seed,
# cycle count and run time), printed at the end of the pytest run.
SUMMARY_LINES = []


# Seconds spent per test file (setup, call and teardown), for the per-file totals at the end: the
# cluster issues bound what their tests add to CI.
FILE_SECONDS = {}


def pytest_runtest_logreport(report):
    test_file = report.nodeid.split("::", 1)[0]
    FILE_SECONDS[test_file] = FILE_SECONDS.get(test_file, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    for line in SUMMARY_LINES:
        terminalreporter.write_line(line)
    if FILE_SECONDS:
        terminalreporter.write_line("seconds per test file: " + ", ".join(
            f"{name.rsplit('/', 1)[-1]} {seconds:.0f}"
            for name, seconds in sorted(FILE_SECONDS.items(), key=lambda item: -item[1])))
        cluster = sum(seconds for name, seconds in FILE_SECONDS.items()
                      if any(part in name for part in ("cluster", "replication", "elect_leaders",
                                                       "leader_epochs")))
        terminalreporter.write_line(f"cluster tests together: {cluster:.0f} s of "
                                    f"{sum(FILE_SECONDS.values()):.0f} s")


# --- Apache Kafka's Java client and tools ---------------------------------------------------------

@pytest.fixture(scope="session")
def java_classes(tmp_path_factory):
    """The Java test programs of tests/clients/java/src, compiled once per session."""
    from java_programs import compile_modern

    return compile_modern(tmp_path_factory.mktemp("java-classes"))


@pytest.fixture(scope="session")
def legacy_classes(tmp_path_factory):
    """legacy_classes(version): the legacy program compiled for that old kafka-clients release
    (one build per API generation, compiled on first use)."""
    from java_programs import compile_legacy, legacy_generation

    built = {}

    def get(version):
        generation = legacy_generation(version)
        if generation not in built:
            built[generation] = compile_legacy(generation, tmp_path_factory.mktemp(f"legacy-{generation}"))
        return built[generation]

    return get
