"""What the compaction tests (issue 37) and the transaction tests (issue 38) share: the broker they
run against, topic admin, bounded waits, and the Java programs of the Kafka ecosystem (Connect's
worker, Streams apps), each run the way its users run it.

The target is Skiff: a single node (conftest.Broker) or 3 brokers on the session's etcd
(test_cluster.SkiffCluster). With SKIFF_ECO_KAFKA_LIBS set to a directory of Apache Kafka 4.1.1's
jars the same tests run against Kafka instead (one KRaft node, or three): that run checks the
tests themselves and is not part of CI (with Kafka 3.9.1's jars, the last release that serves
Fetch v0-v3, it checks the legacy readers too). Install the jars and run, from the repository root:

    mvn -q -f bench/scripts/peers/pom.xml -Dkafka.version=4.1.1 -Dkafka.log4j2 \\
        dependency:copy-dependencies -DoutputDirectory=/tmp/kafka-4.1.1/libs
    SKIFF_ECO_KAFKA_LIBS=/tmp/kafka-4.1.1/libs python3 -m pytest tests/clients/test_connect.py \\
        tests/clients/test_schema_store.py tests/clients/test_streams.py \\
        tests/clients/test_compacted_topics.py -q
    SKIFF_ECO_KAFKA_LIBS=/tmp/kafka-4.1.1/libs python3 -m pytest tests/clients/test_transactions_*.py -q

(the transaction tests of issue 38; test_transactions_legacy.py is Skiff-only and skipped there).

Both targets get the same topic configs and the same cleaner setting (log.cleaner.backoff.ms, so
a cleaning starts within a fraction of a second); only what each needs to start differs."""

import base64
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from conftest import Broker, free_port
from java_programs import JAVA_DIR, JVM_OPTIONS, classpath, javac

KAFKA_LIBS = os.environ.get("SKIFF_ECO_KAFKA_LIBS")
ON_KAFKA = bool(KAFKA_LIBS)


def _kafka_version():
    jars = sorted(pathlib.Path(KAFKA_LIBS).glob("kafka_2.13-*.jar")) if ON_KAFKA else []
    return tuple(int(part) for part in jars[0].stem.split("-")[1].split(".")) if jars else None


KAFKA_VERSION = _kafka_version()
TARGET_NAME = f"Apache Kafka {'.'.join(map(str, KAFKA_VERSION or ()))}" if ON_KAFKA else "Skiff"
# Kafka 4 removed Fetch v0-v3 and the old message formats; Kafka 3.9 still down-converts, so a run
# on it checks what the legacy readers of these tests expect.
TARGET_SERVES_LEGACY_FETCH = not ON_KAFKA or KAFKA_VERSION < (4,)

# How often the cleaner looks for a log to clean when it found none (Kafka's key; Kafka's default
# is 15 s, far too long for a test that waits for a cleaning).
CLEANER_BACKOFF_MS = 200
CLEANER_SETTINGS = (f"log.cleaner.backoff.ms={CLEANER_BACKOFF_MS}",)
# Topic configs that make a compacted topic cleanable within about a second of a segment roll:
# segments roll by age (Kafka 4 refuses a segment.bytes below 1 MiB), any dirty byte is worth a
# cleaning, and nothing waits for a compaction lag.
FAST_SEGMENT_MS = 1000
FAST_CLEANING = {
    "cleanup.policy": "compact",
    "segment.ms": str(FAST_SEGMENT_MS),
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
}

ADMIN_TIMEOUT_S = 30
KAFKA_JVM = ["-Xmx512m", "-Xms256m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
KAFKA_START_TIMEOUT_S = 60
KAFKA_STOP_TIMEOUT_S = 30


def wait_for(condition, timeout_s, what, interval_s=0.2):
    """Polls `condition` until it returns something truthy (returned) or `timeout_s` passes."""
    started = time.monotonic()
    deadline = started + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = condition()
        except Exception as error:  # noqa: BLE001 - a target still starting answers with errors
            last = error
        else:
            if last:
                if os.environ.get("SKIFF_ECO_TIMING"):
                    print(f"waited {time.monotonic() - started:.1f} s for {what}")
                return last
        time.sleep(interval_s)
    raise AssertionError(f"{what}: not within {timeout_s} s on {TARGET_NAME} (last: {last!r})")


# --- Apache Kafka (the check that a test is right) -----------------------------------------------

def _kafka_settings(node_id, port, controller_port, voters, log_dir, replicas):
    return {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": log_dir,
        "num.partitions": "1",
        "default.replication.factor": str(replicas),
        "min.insync.replicas": str(min(2, replicas)),
        "offsets.topic.replication.factor": str(replicas),
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(min(2, replicas)),
        "share.coordinator.state.topic.replication.factor": str(replicas),
        "share.coordinator.state.topic.min.isr": str(min(2, replicas)),
        "group.initial.rebalance.delay.ms": "0",
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
    }


class KafkaNode:
    """One Apache Kafka KRaft node (broker and controller), with conftest.Broker's interface."""

    def __init__(self, directory, node_id, port, controller_port, voters, replicas, settings):
        self.dir = pathlib.Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.host = "127.0.0.1"
        self.process = None
        values = _kafka_settings(node_id, port, controller_port, voters, str(self.dir / "data"), replicas)
        values.update(setting.split("=", 1) for setting in settings)
        self.properties = self.dir / "server.properties"
        self.properties.write_text("".join(f"{key}={value}\n" for key, value in values.items()))

    @property
    def bootstrap(self):
        return f"{self.host}:{self.port}"

    def format(self, cluster_id):
        subprocess.run(["java", *KAFKA_JVM, "-cp", f"{KAFKA_LIBS}/*", "kafka.tools.StorageTool", "format",
                        "-t", cluster_id, "-c", str(self.properties)], check=True, capture_output=True)

    def start(self, port=None):
        log = open(self.dir / "kafka.log", "a")
        self.process = subprocess.Popen(
            ["java", *KAFKA_JVM, "-cp", f"{KAFKA_LIBS}/*", "kafka.Kafka", str(self.properties)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        return self

    def wait_listening(self):
        def listening():
            if self.process.poll() is not None:
                raise AssertionError(f"Kafka exited:\n{self.log_tail()}")
            socket.create_connection(("127.0.0.1", self.port), 1).close()
            return True
        wait_for(listening, KAFKA_START_TIMEOUT_S, "Kafka listening")

    def stop(self, sig=signal.SIGTERM):
        if self.process is None:
            return None
        self.process.send_signal(sig)
        try:
            code = self.process.wait(KAFKA_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.process = None
        return code

    def restart(self):
        self.stop()
        self.start()
        self.wait_listening()
        wait_ready(self.bootstrap, 1)
        return self

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines=40):
        path = self.dir / "kafka.log"
        return "".join(path.read_text(errors="replace").splitlines(True)[-lines:]) if path.exists() else ""


class KafkaCluster:
    """`size` Kafka KRaft nodes forming one quorum; `brokers` as in test_cluster.SkiffCluster."""

    def __init__(self, size, settings=()):
        self.dir = tempfile.mkdtemp(prefix="skiff-eco-kafka-")
        ports = [free_port() for _ in range(size)]
        controllers = [free_port() for _ in range(size)]
        voters = ",".join(f"{i}@127.0.0.1:{port}" for i, port in enumerate(controllers))
        self.brokers = [KafkaNode(os.path.join(self.dir, f"node{i}"), i, ports[i], controllers[i], voters,
                                  size, settings) for i in range(size)]
        cluster_id = "A" + base64.urlsafe_b64encode(uuid.uuid4().bytes).decode()[1:22]
        for node in self.brokers:
            node.format(cluster_id)

    @property
    def bootstrap(self):
        return ",".join(node.bootstrap for node in self.brokers)

    def start(self):
        try:
            for node in self.brokers:
                node.start()
            for node in self.brokers:
                node.wait_listening()
            wait_ready(self.bootstrap, len(self.brokers))
        except Exception:
            self.stop()
            raise
        return self

    def stop(self):
        for node in self.brokers:
            node.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_ready(bootstrap, brokers):
    """Until Metadata lists `brokers` brokers (Kafka listens before its controller is elected)."""
    wait_for(lambda: len(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).brokers) >= brokers,
             KAFKA_START_TIMEOUT_S, f"{brokers} brokers in Metadata")


# --- the target ------------------------------------------------------------------------------------

class SingleNode:
    """One broker of the target: Skiff (conftest.Broker) or one Kafka node."""

    def __init__(self, settings=()):
        settings = list(CLEANER_SETTINGS) + list(settings)
        self.dir = tempfile.mkdtemp(prefix="skiff-eco-")
        if ON_KAFKA:
            self.cluster = KafkaCluster(1, settings).start()
            self.broker = self.cluster.brokers[0]
        else:
            self.cluster = None
            self.broker = Broker(self.dir, ["group.initial.rebalance.delay.ms=0", *settings]).start()

    @property
    def bootstrap(self):
        return self.broker.bootstrap

    def restart(self):
        """A graceful restart on the same port and data."""
        self.broker.restart()
        wait_ready(self.bootstrap, 1)

    def log_tail(self, lines=60):
        if ON_KAFKA:
            return self.broker.log_tail(lines)
        return "".join(self.broker.log_lines[-lines:])

    def stop(self):
        if self.cluster is not None:
            self.cluster.stop()
        else:
            self.broker.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def three_brokers(etcd, settings=()):
    """Three brokers of the target (Skiff on the shared etcd, or a 3-node Kafka quorum), started;
    `.bootstrap` names all three, `.stop()` ends them."""
    settings = list(CLEANER_SETTINGS) + list(settings)
    if ON_KAFKA:
        return KafkaCluster(3, settings).start()
    from test_cluster import SkiffCluster, agreed_controller

    cluster = SkiffCluster(etcd, 3, ["group.initial.rebalance.delay.ms=0", *settings]).start()
    cluster.bootstrap = ",".join(broker.bootstrap for broker in cluster.brokers)
    try:
        agreed_controller(cluster)
        wait_ready(cluster.bootstrap, 3)
    except Exception:
        cluster.stop()
        raise
    return cluster


# --- topics ----------------------------------------------------------------------------------------

def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap, topic, partitions=1, replicas=1, config=None):
    """Creates `topic`; the broker's refusal (e.g. INVALID_CONFIG for a config it lacks) is raised
    as the error it answered."""
    new = NewTopic(topic, num_partitions=partitions, replication_factor=replicas, config=dict(config or {}))
    client = admin(bootstrap)  # held: a collected client ends its pending requests
    client.create_topics([new])[topic].result(ADMIN_TIMEOUT_S)


def topic_configs(bootstrap, topic):
    """{name: (value, source name)} as DescribeConfigs reports `topic`'s configs."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client = admin(bootstrap)
    entries = client.describe_configs([resource])[resource].result(ADMIN_TIMEOUT_S)
    return {name: (entry.value, entry.source) for name, entry in entries.items()}


def assert_compacted_config(bootstrap, topic):
    """What Kafka Connect's TopicAdmin and Confluent's KafkaStore check before they use a topic:
    DescribeConfigs says cleanup.policy is exactly `compact`; and, as for every topic created with
    that config, that it is the topic's own (source DYNAMIC_TOPIC_CONFIG)."""
    configs = topic_configs(bootstrap, topic)
    assert "cleanup.policy" in configs, f"{topic}: DescribeConfigs has no cleanup.policy: {sorted(configs)}"
    value, source = configs["cleanup.policy"]
    assert value == "compact", f"{topic}: cleanup.policy is {value!r}"
    assert source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, f"{topic}: cleanup.policy's source is {source}"
    return configs


def partition_count(bootstrap, topic):
    return len(admin(bootstrap).list_topics(topic, timeout=10).topics[topic].partitions)


def read_partition(bootstrap, topic, partition=0, start=0, timeout_s=30):
    """Every record of one partition from `start` to its high watermark, read with confluent-kafka:
    [(offset, key, value)], value None for a tombstone."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "skiff-eco-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        if high <= max(start, low):
            return []
        consumer.assign([TopicPartition(topic, partition, start)])
        seen = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return seen
                raise AssertionError(f"reading {topic}/{partition}: {message.error()}")
            seen.append((message.offset(), message.key(), message.value()))
        raise AssertionError(f"reading {topic}/{partition} to {high} took over {timeout_s} s: {len(seen)} records")
    finally:
        consumer.close()


# --- Java programs of the ecosystem ---------------------------------------------------------------

ECOSYSTEM_CLASSPATH = "classpath-ecosystem.txt"


def ecosystem_classpath():
    return classpath(ECOSYSTEM_CLASSPATH)


def compile_ecosystem(out_dir):
    """tests/clients/java/ecosystem/src compiled against Kafka 4.1.1's Connect and Streams jars."""
    return javac(sorted((JAVA_DIR / "ecosystem" / "src").rglob("*.java")), ecosystem_classpath(), out_dir)


def log4j2_config(directory, level="INFO"):
    """A log4j2 configuration writing `level` and above to standard output (the JVM's log file)."""
    path = pathlib.Path(directory) / "log4j2.properties"
    path.write_text(
        f"rootLogger.level = {level}\n"
        "rootLogger.appenderRef.stdout.ref = STDOUT\n"
        "appender.stdout.type = Console\n"
        "appender.stdout.name = STDOUT\n"
        "appender.stdout.layout.type = PatternLayout\n"
        "appender.stdout.layout.pattern = [%d] %p %m (%c)%n\n")
    return path


class JavaProcess:
    """A long-running JVM (a Connect worker, a Streams app): its output kept line by line in memory
    and in `log_path`, commands written to its standard input, stopped by a signal."""

    def __init__(self, main_class, args, cp, log_path, jvm_options=()):
        self.log_path = pathlib.Path(log_path)
        self.lines = []
        self._log = open(self.log_path, "a")
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            ["java", *JVM_OPTIONS, *jvm_options, "-cp", cp, main_class, *map(str, args)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.process.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))
            self._log.write(line)
            self._log.flush()

    def send(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def lines_since(self, index):
        with self._lock:
            return self.lines[index:]

    def alive(self):
        return self.process.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout_s=60):
        """Sends `sig` and waits for the exit; returns the exit code (killed after `timeout_s`)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        time.sleep(0.1)  # the drain thread's last lines
        return code

    def tail(self, lines=60):
        with self._lock:
            return "\n".join(self.lines[-lines:])
