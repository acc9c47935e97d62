"""The queue workload's clients (confluent-kafka, librdkafka): producers and consumers that write
every invocation and completion into the history (history.py). They only record what they did and
what the broker answered; judging is the checker's, faults are the scheduler's.

- Producers: idempotent, acks=all; each record is a unique integer value sent to a partition the
  seed picks, keyed by its partition. A fatal producer error ends the session: a new producer with
  a new process number takes over.
- Consumers with `subscribe` share one group (rebalances: every assignment and revocation is in
  the history; revoked partitions are committed in the revocation callback). Consumers with
  `assign` each have their own group and read every partition from its committed offset. Both
  commit their positions synchronously every COMMIT_INTERVAL_S and read the group's committed
  offsets back every COMMITTED_READ_INTERVAL_S. The seed closes a consumer now and then; a new
  session (new process number) replaces it.
- The final read: once faults healed, one fresh consumer reads every partition from its start to
  its high watermark, and each group's committed offsets are read once more."""

import itertools
import logging
import random
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from history import FAIL, INFO, OK

SEND_TIMEOUT_MS = 20000
POLL_TIMEOUT_S = 0.5
POLL_BATCH = 200
COMMIT_INTERVAL_S = 1.0
COMMITTED_READ_INTERVAL_S = 3.0
CONSUMER_SESSION_MS = 6000
# Mean seconds between two closes of one consumer (each reopens as a new session).
CONSUMER_RESTART_MEAN_S = 25.0
FLUSH_TIMEOUT_S = 30
FINAL_READ_TIMEOUT_S = 90
NO_OFFSET = -1001
VALUES_PER_PROCESS = 10_000_000
SUBSCRIBE_GROUP = "jepsen-subscribe"


class Processes:
    """Process numbers, one per client session, never reused."""

    def __init__(self):
        self._numbers = itertools.count()
        self._lock = threading.Lock()

    def next(self):
        with self._lock:
            return next(self._numbers)


class Client(threading.Thread):
    def __init__(self, workload, name, seed):
        super().__init__(daemon=True, name=name)
        self.workload = workload
        self.history = workload.history
        self.rng = random.Random(f"{name}-{seed}")
        self.errors = []

    def run(self):
        try:
            self.loop()
        except Exception as error:  # noqa: BLE001 - reported by the workload's stop()
            self.errors.append(repr(error))


class ProducerClient(Client):
    def __init__(self, workload, name, seed, rate_per_s):
        super().__init__(workload, name, seed)
        self.interval_s = 1.0 / rate_per_s

    def loop(self):
        while not self.workload.stopping.is_set():
            self.session(self.workload.processes.next())

    def session(self, process):
        producer = Producer({**self.workload.client_config, "enable.idempotence": True,
                             "acks": "all", "linger.ms": 5, "message.timeout.ms": SEND_TIMEOUT_MS,
                             "retry.backoff.ms": 100})
        fatal = threading.Event()
        values = itertools.count(process * VALUES_PER_PROCESS)
        while not self.workload.stopping.is_set() and not fatal.is_set():
            partition = self.rng.randrange(self.workload.partitions)
            value = next(values)
            op = self.history.invoke(process, "send", partition=partition, key=f"k{partition}", value=value)
            try:
                producer.produce(self.workload.topic, key=f"k{partition}", value=str(value), partition=partition,
                                 on_delivery=self._delivered(op, process, value, fatal))
            except KafkaException as error:
                # Refused before it was queued (the producer is fatally broken): never sent.
                self.history.complete(op, process, "send", FAIL, error=str(error))
                if error.args[0].fatal():
                    break
                raise
            producer.poll(0)
            time.sleep(self.interval_s)
        producer.flush(FLUSH_TIMEOUT_S)

    def _delivered(self, op, process, value, fatal):
        def delivered(error, message):
            if error is None:
                self.history.complete(op, process, "send", OK, offset=message.offset(), value=value)
                return
            if error.fatal():
                fatal.set()
            # Any delivery error may hide a write that happened (a timeout after the append).
            self.history.complete(op, process, "send", INFO, error=str(error))
        return delivered


class ConsumerClient(Client):
    """One consumer slot: `mode` is "subscribe" or "assign"."""

    def __init__(self, workload, name, seed, mode, slot):
        super().__init__(workload, name, seed)
        self.mode = mode
        self.group = SUBSCRIBE_GROUP if mode == "subscribe" else f"jepsen-assign-{slot}"
        workload.groups.add(self.group)

    def loop(self):
        while not self.workload.stopping.is_set():
            lifetime = self.rng.expovariate(1 / CONSUMER_RESTART_MEAN_S)
            self.session(self.workload.processes.next(), time.monotonic() + lifetime)

    def session(self, process, close_at):
        ConsumerSession(self, process).run(close_at)


class ConsumerSession:
    """One consumer's life from its open to its close."""

    def __init__(self, client, process):
        self.client, self.process = client, process
        self.history, self.workload = client.history, client.workload
        self.positions = {}  # partition -> next offset to read (owned partitions only)
        self.consumer = Consumer({
            **self.workload.client_config, **self.workload.consumer_config, "group.id": client.group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": CONSUMER_SESSION_MS, "heartbeat.interval.ms": 1000,
            "enable.partition.eof": False})

    def run(self, close_at):
        if self.client.mode == "subscribe":
            self.history.event(self.process, "subscribe", partitions=[])
            self.consumer.subscribe([self.workload.topic], on_assign=self._assigned, on_revoke=self._revoked)
        else:
            self._assign_all()
        next_commit = time.monotonic() + COMMIT_INTERVAL_S
        next_read = time.monotonic() + COMMITTED_READ_INTERVAL_S
        try:
            while not self.workload.stopping.is_set() and time.monotonic() < close_at:
                self._poll()
                if time.monotonic() >= next_commit:
                    self._commit(dict(self.positions))
                    next_commit = time.monotonic() + COMMIT_INTERVAL_S
                if time.monotonic() >= next_read:
                    self._read_committed()
                    next_read = time.monotonic() + COMMITTED_READ_INTERVAL_S
            if self.client.mode == "assign":
                self._commit(dict(self.positions))
        finally:
            self.consumer.close()  # a subscribed consumer commits in its revocation callback

    def _assign_all(self):
        partitions = list(range(self.workload.partitions))
        committed = self._read_committed(partitions) or {}
        start = {p: committed.get(p, NO_OFFSET) for p in partitions}
        self.consumer.assign([TopicPartition(self.workload.topic, p, o if o >= 0 else OFFSET_BEGINNING)
                              for p, o in start.items()])
        self.history.event(self.process, "assign", partitions=partitions, start=start)
        self.positions = {p: o for p, o in start.items() if o >= 0}

    def _assigned(self, consumer, partitions):
        self.history.event(self.process, "rebalance", partitions=sorted(tp.partition for tp in partitions),
                           change="assigned")

    def _revoked(self, consumer, partitions):
        revoked = {tp.partition for tp in partitions}
        self._commit({p: o for p, o in self.positions.items() if p in revoked})
        self.positions = {p: o for p, o in self.positions.items() if p not in revoked}
        self.history.event(self.process, "rebalance", partitions=sorted(revoked), change="revoked")

    def _poll(self):
        poll(self.consumer, self.history, self.process, self.positions)

    def _commit(self, offsets):
        if not offsets:
            return
        op = self.history.invoke(self.process, "commit", group=self.client.group, offsets=offsets)
        try:
            answer = self.consumer.commit(offsets=[TopicPartition(self.workload.topic, p, o)
                                                   for p, o in offsets.items()], asynchronous=False)
        except KafkaException as error:
            # A refused generation is a definite failure; a timeout may have been applied.
            outcome = FAIL if not error.args[0].retriable() else INFO
            self.history.complete(op, self.process, "commit", outcome, group=self.client.group,
                                  error=str(error))
            return
        failed = [str(tp.error) for tp in answer if tp.error is not None]
        if failed:
            self.history.complete(op, self.process, "commit", INFO, group=self.client.group, error=failed)
        else:
            self.history.complete(op, self.process, "commit", OK, group=self.client.group, offsets=offsets)

    def _read_committed(self, partitions=None):
        return read_committed(self.consumer, self.history, self.process, self.client.group,
                              self.workload.topic, partitions or list(range(self.workload.partitions)))


def poll(consumer, history, process, positions, **fields):
    """A `poll` op (`fields` go into its invocation); updates `positions` (partition -> next
    offset) from the records it returned. Its op id, or None when it failed."""
    return poll_records(consumer, history, process, positions, **fields)[0]


def poll_records(consumer, history, process, positions, batch=POLL_BATCH, **fields):
    """poll's op id (None when it failed) and the [partition, offset, value] records it returned,
    at most `batch` of them."""
    op = history.invoke(process, "poll", **fields)
    try:
        messages = consumer.consume(batch, timeout=POLL_TIMEOUT_S)
    except KafkaException as error:
        history.complete(op, process, "poll", INFO, error=str(error))
        return None, []
    records = []
    errors = []
    for message in messages:
        if message.error() is not None:
            errors.append(str(message.error()))
            continue
        records.append([message.partition(), message.offset(), int(message.value())])
        positions[message.partition()] = message.offset() + 1
    history.complete(op, process, "poll", OK, records=records, **({"errors": errors} if errors else {}))
    return op, records


def read_committed(consumer, history, process, group, topic, partitions):
    """A `committed` op: {partition: committed offset} or None when it failed."""
    op = history.invoke(process, "committed", group=group, partitions=partitions)
    try:
        answer = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=5)
    except KafkaException as error:
        history.complete(op, process, "committed", INFO, group=group, error=str(error))
        return None
    offsets = {tp.partition: tp.offset for tp in answer if tp.error is None}
    history.complete(op, process, "committed", OK, group=group, offsets=offsets)
    return offsets


def _client_logger(path):
    logger = logging.getLogger(f"jepsen.clients.{path}")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.FileHandler(path) if path else logging.NullHandler())
    return logger


class Workload:
    """Starts the clients against `bootstrap`, stops them, and does the final read."""

    # More settings of every consumer (the transactional workload reads read_committed).
    consumer_config = {}

    def __init__(self, bootstrap, topic, partitions, history, seed, producers=2, subscribers=2, assigners=1,
                 rate_per_s=40, client_log=None):
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        # librdkafka's own log lines (connection refusals while a broker is down are expected) go to
        # `client_log` rather than the terminal.
        self.client_config = {"bootstrap.servers": bootstrap, "logger": _client_logger(client_log)}
        self.history, self.seed = history, seed
        self.processes = Processes()
        self.stopping = threading.Event()
        self.groups = set()
        self.clients = ([ProducerClient(self, f"producer-{i}", seed, rate_per_s) for i in range(producers)]
                        + [ConsumerClient(self, f"subscriber-{i}", seed, "subscribe", i) for i in range(subscribers)]
                        + [ConsumerClient(self, f"assigner-{i}", seed, "assign", i) for i in range(assigners)])

    def start(self):
        for client in self.clients:
            client.start()

    def stop(self):
        """Stops every client (producers flush); the clients' unexpected errors."""
        self.stopping.set()
        for client in self.clients:
            client.join(FLUSH_TIMEOUT_S + 30)
        return [f"{client.name}: {error}" for client in self.clients for error in client.errors] + \
               [f"{client.name}: did not stop" for client in self.clients if client.is_alive()]

    def final_read(self):
        """Reads every partition from its start to its high watermark; True when it got there."""
        process = self.processes.next()
        consumer = Consumer({**self.client_config, **self.consumer_config, "group.id": "jepsen-final",
                             "enable.auto.commit": False, "enable.partition.eof": False})
        try:
            ends = {p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1]
                    for p in range(self.partitions)}
            done = self._read_to(consumer, process, ends)
            for group in sorted(self.groups):
                self._final_committed(group)
        finally:
            consumer.close()
        return done

    def _read_to(self, consumer, process, ends):
        partitions = list(range(self.partitions))
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in partitions])
        self.history.event(process, "assign", partitions=partitions)
        positions = {p: 0 for p in partitions}
        deadline = time.monotonic() + FINAL_READ_TIMEOUT_S
        while any(positions[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
            op = self.history.invoke(process, "poll", final=True)
            records = []
            for message in consumer.consume(POLL_BATCH, timeout=POLL_TIMEOUT_S):
                if message.error() is None:
                    records.append([message.partition(), message.offset(), int(message.value())])
                    positions[message.partition()] = message.offset() + 1
            # The consumer's position also passes what it never returns (transaction markers,
            # aborted records): a read_committed read ends at a marker's offset + 1.
            for tp in consumer.position([TopicPartition(self.topic, p) for p in partitions]):
                positions[tp.partition] = max(positions[tp.partition], tp.offset)
            self.history.complete(op, process, "poll", OK, records=records, final=True)
        reached = all(positions[p] >= ends[p] for p in partitions)
        self.history.event(process, "final-read", OK if reached else INFO, ends=ends, positions=positions)
        return reached

    def _final_committed(self, group):
        # With read_committed (the transactional workload) the read waits for offsets a transaction
        # committed to become stable (librdkafka asks OffsetFetch for stable offsets).
        consumer = Consumer({**self.client_config, **self.consumer_config, "group.id": group,
                             "enable.auto.commit": False})
        try:
            read_committed(consumer, self.history, self.processes.next(), group, self.topic,
                           list(range(self.partitions)))
        finally:
            consumer.close()
