"""The systems a queue run targets, behind one small interface the fault scheduler uses: a
3-broker Skiff cluster on 127.0.0.1 with its own 3-member etcd (started with the cluster tests'
own helpers from tests/clients, imported, not copied), the control (3 Apache Kafka 4.1.1 nodes in
KRaft mode), or any bootstrap list the run cannot touch (no faults then). A target owns its
processes; it never writes the history.

The interface (Skiff's and Kafka's targets implement all of it): `bootstrap`, `size`,
`create_topic(topic, partitions)`, `leader_of(topic, partition)` (-1 when none is known),
`kill(index)` / `restart(index)` (SIGKILL, then start on the same port and data), `pause(index)` /
`resume(index)` (SIGSTOP / SIGCONT), `wait_healthy(topic, timeout_s)` (every broker running and
every partition led with a full ISR), `session_s` (how long a paused broker takes to lose its
session), `controller()` (the broker that is controller, -1 when unknown), `coordinator_of(group)`,
`txn_coordinator_of(transactional_id)` and `stop()`. With a network lab (netns.py: each node in its own namespace) a target also cuts:
`cut(index, other)` drops what node `index` sends to node `other`, `heal_cuts()` removes every
cut. Skiff's target has an etcd (`has_etcd`): `cut_from_etcd(index)`, `kill_etcd(member)` and
`restart_etcd(member)`; Kafka's control has none (its metadata quorum is its own nodes)."""

import base64
import os
import pathlib
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid

from confluent_kafka.admin import AdminClient, NewTopic

CLIENT_TESTS = pathlib.Path(__file__).resolve().parents[1] / "clients"
if str(CLIENT_TESTS) not in sys.path:
    sys.path.append(str(CLIENT_TESTS))

import conftest  # noqa: E402 (found through the path set just above)
from conftest import free_port  # noqa: E402

REPLICATION_FACTOR = 3
METADATA_TIMEOUT_S = 5


class TargetNotReady(RuntimeError):
    """The cluster did not become healthy in time."""


def _quiet(bootstrap):
    """A metadata client's config: a broker down during a fault is expected, not worth a log line."""
    return {"bootstrap.servers": bootstrap, "log_level": 0}


def describe(bootstrap, topic):
    """{partition: (leader, replicas, isr)}, or {} when the metadata request fails."""
    try:
        metadata = AdminClient(_quiet(bootstrap)).list_topics(topic, timeout=METADATA_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - a broker down or paused: the caller retries
        return {}
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return {}
    return {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs)) for p in found.partitions.values()}


def controller_id(bootstrap):
    """The controller Metadata names, or -1."""
    try:
        return AdminClient(_quiet(bootstrap)).list_topics(timeout=METADATA_TIMEOUT_S).controller_id
    except Exception:  # noqa: BLE001 - a broker down or paused: unknown
        return -1


def coordinator_of(bootstrap, group):
    """The broker that coordinates `group` (DescribeGroups after FindCoordinator); raises when
    none answers (a coordinator moving or down)."""
    admin = AdminClient(_quiet(bootstrap))  # held until the answer: a collected client cancels it
    future = admin.describe_consumer_groups([group], request_timeout=METADATA_TIMEOUT_S)[group]
    coordinator = future.result(METADATA_TIMEOUT_S * 2).coordinator
    if coordinator is None or coordinator.id < 0:
        raise LookupError(f"no coordinator of {group} named")
    return coordinator.id


FIND_COORDINATOR = 10
FIND_COORDINATOR_VERSION = 1  # the oldest both systems take: no tagged fields
TRANSACTION_KEY = 1
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 15, 16


def transaction_coordinator_of(bootstrap, transactional_id):
    """The broker that coordinates `transactional_id`: FindCoordinator with key type 1
    (TRANSACTION), sent raw since confluent-kafka's AdminClient asks only for groups. Each
    bootstrap address is asked in turn; raises LookupError when none names one (the coordinator
    moving, or the brokers asked down)."""
    client, key = b"jepsen-faults", transactional_id.encode()
    request = (struct.pack(">hhih", FIND_COORDINATOR, FIND_COORDINATOR_VERSION, 1, len(client)) + client
               + struct.pack(">h", len(key)) + key + struct.pack(">b", TRANSACTION_KEY))
    answers = []
    for address in bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=METADATA_TIMEOUT_S) as sock:
                sock.settimeout(METADATA_TIMEOUT_S)
                sock.sendall(struct.pack(">i", len(request)) + request)
                size = struct.unpack(">i", _receive(sock, 4))[0]
                answer = _receive(sock, size)
        except OSError as error:
            answers.append(f"{address}: {error}")
            continue
        # correlation id, throttle_time_ms, error_code, error_message (nullable), node_id, ...
        _correlation, _throttle, error_code, message_length = struct.unpack(">iihh", answer[:12])
        at = 12 + max(message_length, 0)
        node_id = struct.unpack(">i", answer[at:at + 4])[0]
        if error_code == 0 and node_id >= 0:
            return node_id
        answers.append(f"{address}: error {error_code}")
    raise LookupError(f"no coordinator of transactional id {transactional_id} named ({'; '.join(answers)})")


def _receive(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


class BootstrapTarget:
    """A cluster the run only talks to: no faults, no health beyond the metadata."""

    size = 0
    session_s = 0
    lab = None
    has_etcd = False

    def __init__(self, bootstrap):
        self.bootstrap = bootstrap

    def create_topic(self, topic, partitions):
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(topic, partitions, REPLICATION_FACTOR)])[topic].result(30)

    def leader_of(self, topic, partition):
        return describe(self.bootstrap, topic).get(partition, (-1,))[0]

    def wait_healthy(self, topic, timeout_s):
        _wait(lambda: describe(self.bootstrap, topic), timeout_s, "the topic's metadata")

    def save_logs(self, prefix):
        pass

    def stop(self):
        pass


class SkiffTarget:
    """3 Skiff brokers (release binary, etcd feature) and their own 3-member etcd cluster, with the
    replication settings of the cluster tests (min.insync.replicas=2, 3 s sessions): on 127.0.0.1,
    or with a `lab` each broker in its own namespace and etcd on the hub's bridge. `binary` (default:
    the cluster tests' SKIFF_BIN) and `settings` (more `key=value`) serve the mutation runs."""

    size = 3
    has_etcd = True

    def __init__(self, lab=None, binary=None, settings=()):
        from etcd_cluster import EtcdCluster
        from test_cluster import SESSION_MS
        from test_replication import REPLICA_SETTINGS
        from test_replication_faults import start_cluster

        if binary is not None:
            conftest.BROKER_BIN = binary
        self.lab = lab
        self.session_s = SESSION_MS / 1000
        self.etcd = EtcdCluster(host=lab.etcd_ip if lab else "127.0.0.1").start()
        hosts = {i: lab.node_ip(i) if lab else "127.0.0.1" for i in range(self.size)}
        prefixes = {i: lab.prefix(i) for i in range(self.size)} if lab else None
        try:
            self.cluster = start_cluster(self.etcd, hosts=hosts, prefixes=prefixes,
                                         settings=(*REPLICA_SETTINGS, *settings))
        except Exception:
            self.etcd.stop()
            raise
        self.hosts = hosts
        self.ports = [broker.port for broker in self.cluster.brokers]

    @property
    def bootstrap(self):
        return ",".join(f"{self.hosts[i]}:{port}" for i, port in enumerate(self.ports))

    def controller(self):
        return controller_id(self.bootstrap)

    def coordinator_of(self, group):
        return coordinator_of(self.bootstrap, group)

    def txn_coordinator_of(self, transactional_id):
        return transaction_coordinator_of(self.bootstrap, transactional_id)

    def cut(self, index, other):
        self.lab.cut(index, self.lab.node_ip(other))

    def cut_from_etcd(self, index):
        self.lab.cut(index, self.lab.etcd_ip)

    def heal_cuts(self):
        self.lab.heal()

    def kill_etcd(self, member):
        self.etcd.kill(member)

    def restart_etcd(self, member):
        self.etcd.start_member(member)
        self.etcd.wait_healthy(member)

    def create_topic(self, topic, partitions):
        BootstrapTarget(self.bootstrap).create_topic(topic, partitions)
        self.wait_healthy(topic, 30)

    def leader_of(self, topic, partition):
        for broker in self.cluster.running():
            leader = describe(broker.bootstrap, topic).get(partition, (-1,))[0]
            if leader >= 0:
                return leader
        return -1

    def kill(self, index):
        self.cluster.brokers[index].stop(signal.SIGKILL)

    def restart(self, index):
        self.cluster.brokers[index].start(port=self.ports[index])

    def pause(self, index):
        self.cluster.brokers[index].process.send_signal(signal.SIGSTOP)

    def resume(self, index):
        broker = self.cluster.brokers[index]
        if broker.alive():
            broker.process.send_signal(signal.SIGCONT)
        else:
            # A broker that ended while it was stopped (queue seed 134 lost one that way, unexplained).
            print(f"resume: broker {index} is not running ({process_status(broker.process)})", flush=True)

    def wait_healthy(self, topic, timeout_s):
        def healthy():
            if len(self.cluster.running()) != self.size:
                return False
            partitions = describe(self.bootstrap, topic)
            return partitions and all(leader >= 0 and len(isr) == REPLICATION_FACTOR
                                      for leader, _, isr in partitions.values())
        _wait(healthy, timeout_s, "every broker up and every partition led with a full ISR")

    def log_tail(self, lines=40):
        return {index: "".join(broker.log_lines[-lines:]) for index, broker in enumerate(self.cluster.brokers)}

    def save_logs(self, prefix):
        """Writes each broker's log (every session of it) to `prefix`.brokerN.log, ending with a
        line of the harness's own: whether that broker was still running, or how it ended."""
        for index, broker in enumerate(self.cluster.brokers):
            status = f"(harness) at the end of the run: {process_status(broker.process)}\n"
            pathlib.Path(f"{prefix}.broker{index}.log").write_text("".join(broker.log_lines) + status)

    def stop(self):
        if self.lab:
            self.lab.heal()
        for index in range(self.size):
            self.resume(index)
        self.cluster.stop()
        self.etcd.stop()


# Kafka 4.1.1 with the same replication settings as SkiffTarget's brokers (3 s broker sessions,
# min.insync.replicas=2, a 5 s replica lag); its jars are installed by `bench/scripts/peers/pom.xml`
# (README.md says how) into KAFKA_LIBS.
KAFKA_LIBS = os.environ.get("JEPSEN_KAFKA_LIBS", "/tmp/jepsen-kafka/kafka-4.1.1/libs")
KAFKA_JVM = ["-Xmx512m", "-Xms512m", "-XX:+UseG1GC", "-Djava.awt.headless=true"]
KAFKA_START_TIMEOUT_S = 60
KAFKA_TOOL_TIMEOUT_S = 60
KAFKA_SETTINGS = {
    "process.roles": "broker,controller", "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "default.replication.factor": "3", "min.insync.replicas": "2", "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
    "replica.lag.time.max.ms": "5000", "replica.fetch.wait.max.ms": "200",
    "broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0", "unclean.leader.election.enable": "false",
}




class KafkaTarget:
    """The control: 3 Apache Kafka 4.1.1 nodes in KRaft mode, each broker and controller at once
    (node ids 0..2, so broker ids are indexes as in SkiffTarget), on 127.0.0.1 or with a `lab` each
    in its own namespace. Its metadata quorum is its own nodes: no etcd."""

    size = 3
    session_s = 3.0
    has_etcd = False

    def __init__(self, libs=KAFKA_LIBS, lab=None):
        self.libs, self.lab = libs, lab
        self.hosts = [lab.node_ip(i) if lab else "127.0.0.1" for i in range(self.size)]
        self.dir = tempfile.mkdtemp(prefix="jepsen-kafka-")
        self.ports = [free_port() for _ in range(self.size)]
        controllers = [free_port() for _ in range(self.size)]
        voters = ",".join(f"{i}@{self.hosts[i]}:{port}" for i, port in enumerate(controllers))
        cluster_id = "A" + base64.urlsafe_b64encode(uuid.uuid4().bytes).decode()[1:22]
        self.processes = [None] * self.size
        for index in range(self.size):
            node_dir = os.path.join(self.dir, f"node{index}")
            os.makedirs(node_dir)
            settings = dict(KAFKA_SETTINGS, **{
                "node.id": str(index), "controller.quorum.voters": voters,
                "listeners": (f"PLAINTEXT://{self.hosts[index]}:{self.ports[index]},"
                              f"CONTROLLER://{self.hosts[index]}:{controllers[index]}"),
                "advertised.listeners": f"PLAINTEXT://{self.hosts[index]}:{self.ports[index]}",
                "log.dirs": os.path.join(node_dir, "data")})
            with open(self._properties(index), "w") as properties:
                properties.write("".join(f"{key}={value}\n" for key, value in settings.items()))
            subprocess.run(["java", *KAFKA_JVM, "-cp", f"{libs}/*", "kafka.tools.StorageTool", "format",
                            "-t", cluster_id, "-c", self._properties(index)],
                           check=True, capture_output=True)
        try:
            for index in range(self.size):
                self.restart(index)
            for index in range(self.size):
                self._wait_listening(index)
            _wait(lambda: len(describe_brokers(self.bootstrap)) == self.size, KAFKA_START_TIMEOUT_S,
                  "3 Kafka brokers in Metadata")
        except Exception:
            self.stop()
            raise

    def _properties(self, index):
        return os.path.join(self.dir, f"node{index}", "server.properties")

    @property
    def bootstrap(self):
        return ",".join(f"{host}:{port}" for host, port in zip(self.hosts, self.ports))

    def create_topic(self, topic, partitions):
        BootstrapTarget(self.bootstrap).create_topic(topic, partitions)
        self.wait_healthy(topic, 60)

    def controller(self):
        """The KRaft quorum's leader (Metadata names a random broker as controller in KRaft, so
        ask Kafka's own quorum tool), or -1."""
        try:
            answer = subprocess.run(
                ["java", "-Xmx128m", "-cp", f"{self.libs}/*", "org.apache.kafka.tools.MetadataQuorumCommand",
                 "--bootstrap-server", self.bootstrap, "describe", "--status"],
                capture_output=True, text=True, timeout=KAFKA_TOOL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return -1
        found = re.search(r"LeaderId:\s*(\d+)", answer.stdout)
        return int(found.group(1)) if found else -1

    def coordinator_of(self, group):
        return coordinator_of(self.bootstrap, group)

    def txn_coordinator_of(self, transactional_id):
        return transaction_coordinator_of(self.bootstrap, transactional_id)

    def cut(self, index, other):
        self.lab.cut(index, self.lab.node_ip(other))

    def heal_cuts(self):
        self.lab.heal()

    def leader_of(self, topic, partition):
        return describe(self.bootstrap, topic).get(partition, (-1,))[0]

    def kill(self, index):
        process, self.processes[index] = self.processes[index], None
        process.send_signal(signal.SIGKILL)
        process.wait()

    def restart(self, index):
        log = open(os.path.join(self.dir, f"node{index}", "kafka.log"), "a")
        self.processes[index] = subprocess.Popen(
            [*(self.lab.prefix(index) if self.lab else ()), "java", *KAFKA_JVM, "-cp", f"{self.libs}/*", "kafka.Kafka", self._properties(index)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def _wait_listening(self, index):
        def listening():
            try:
                socket.create_connection((self.hosts[index], self.ports[index]), 1).close()
                return True
            except OSError:
                return False
        _wait(listening, KAFKA_START_TIMEOUT_S, f"Kafka node {index} listening")

    def pause(self, index):
        self.processes[index].send_signal(signal.SIGSTOP)

    def save_logs(self, prefix):
        """Copies each node's log to `prefix`.brokerN.log (stop() removes the node directories)."""
        for index in range(self.size):
            shutil.copyfile(os.path.join(self.dir, f"node{index}", "kafka.log"), f"{prefix}.broker{index}.log")

    def resume(self, index):
        if self.processes[index] is not None:
            self.processes[index].send_signal(signal.SIGCONT)

    def wait_healthy(self, topic, timeout_s):
        def healthy():
            partitions = describe(self.bootstrap, topic)
            return (all(p is not None and p.poll() is None for p in self.processes) and partitions
                    and all(leader >= 0 and len(isr) == REPLICATION_FACTOR for leader, _, isr in partitions.values()))
        _wait(healthy, timeout_s, "every Kafka node up and every partition led with a full ISR")

    def stop(self):
        if self.lab:
            self.lab.heal()
        for index, process in enumerate(self.processes):
            if process is not None:
                self.resume(index)
                process.terminate()
        for process in self.processes:
            if process is not None:
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.processes = [None] * self.size
        shutil.rmtree(self.dir, ignore_errors=True)


def describe_brokers(bootstrap):
    try:
        return AdminClient(_quiet(bootstrap)).list_topics(timeout=METADATA_TIMEOUT_S).brokers
    except Exception:  # noqa: BLE001 - not up yet
        return {}


def process_status(process):
    """How a broker process stands: running, or its exit code (a negative one is the signal that
    ended it, as subprocess reports it)."""
    if process is None:
        return "not started"
    code = process.poll()
    if code is None:
        return "running"
    return f"ended by signal {-code}" if code < 0 else f"exited with code {code}"


def _wait(condition, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TargetNotReady(f"{what} not within {timeout_s} s")
        time.sleep(0.2)
