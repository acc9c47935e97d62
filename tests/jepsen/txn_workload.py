"""The transactional workload's clients (confluent-kafka, librdkafka's transactional API): they
record every transaction they try, every read and what the broker answered (history.py's `txn`
op); judging is txn_checker.py's, faults are the scheduler's.

- Transactional clients (3 by default), each with its own `transactional.id`. A session is one
  producer (init_transactions, then one transaction after another) and its own read_committed
  consumer (assign, every partition from its end), under one process number; a fatal error,
  fencing or an init that does not succeed ends the session and the next one takes a new number.
  Each transaction sends 1-4 unique integer values to 1-3 partitions the seed picks; some also
  read (a poll of the session's consumer) before, between or after the sends; then it commits,
  or (seeded, ABORT_PROBABILITY) aborts. A transaction flushes before it ends, so the records of
  an aborted one are in the log for read_committed readers to hide.
- Consumers: the queue workload's (workload.py: subscribe in one group, assign in groups of their
  own, committing offsets), reading read_committed.
- The final read: once faults healed, it waits until no transaction is open (each partition's
  read_committed end equals its high watermark), then reads every partition read_committed from
  its start to its end, as the queue's does.

A transaction's fate in the history: ok when commit_transaction returned; fail when it certainly
did not commit (the abort it planned; an error before the commit was requested; an abort that
succeeded after a failed commit, which the coordinator would refuse had the commit happened);
info otherwise (a commit that failed and could not be aborted, a fatal error during the commit)."""

import itertools
import time

from confluent_kafka import OFFSET_END, Consumer, KafkaException, Producer, TopicPartition

from history import FAIL, INFO, OK
from workload import VALUES_PER_PROCESS, Client, Workload, poll

TXN_TIMEOUT_MS = 20000
# librdkafka requires message.timeout.ms <= transaction.timeout.ms.
MESSAGE_TIMEOUT_MS = 15000
END_TIMEOUT_S = 30
END_ATTEMPTS = 3
INIT_TIMEOUT_S = 20
INIT_PATIENCE_S = 60
FLUSH_TIMEOUT_S = 20
ABORT_PROBABILITY = 0.2
READ_PROBABILITY = 0.4
VALUES_PER_TXN = (1, 4)
PARTITIONS_PER_TXN_MAX = 3
BROKEN_SESSION_PAUSE_S = 1.0
# Until no transaction is open before the final read: a session that broke may leave one for the
# coordinator to abort after the transaction timeout.
STABLE_TIMEOUT_S = TXN_TIMEOUT_MS / 1000 + 40


def _error(exception):
    """(text, KafkaError or None) of an exception a transactional call raised."""
    error = exception.args[0] if isinstance(exception, KafkaException) else None
    return str(exception), error


class TxnClient(Client):
    """One transactional id and its sessions, one after another."""

    def __init__(self, workload, name, seed, slot, rate_per_s):
        super().__init__(workload, name, seed)
        self.slot = slot
        self.transactional_id = f"jepsen-txn-{slot}"
        self.interval_s = 1.0 / rate_per_s

    def loop(self):
        clean = True
        while not self.workload.stopping.is_set():
            clean = TxnSession(self, self.workload.processes.next()).run()
            if not clean:
                time.sleep(BROKEN_SESSION_PAUSE_S)
        if not clean:
            # A new session's init_transactions aborts what the broken one left open, so the
            # final read need not wait for the transaction timeout.
            TxnSession(self, self.workload.processes.next()).init()


class TxnSession:
    """One producer session of a transactional id, with its read_committed consumer."""

    def __init__(self, client, process):
        self.client, self.process = client, process
        self.workload, self.history, self.rng = client.workload, client.history, client.rng
        self.values = itertools.count(process * VALUES_PER_PROCESS)
        self.positions = {}
        self.delivered = {}  # mop index -> offset (None: the delivery failed)
        self.producer = Producer({
            **self.workload.client_config, "transactional.id": client.transactional_id,
            "transaction.timeout.ms": TXN_TIMEOUT_MS, "message.timeout.ms": MESSAGE_TIMEOUT_MS,
            "linger.ms": 5, "retry.backoff.ms": 100})

    def run(self):
        """Transactions until the workload stops (True) or the session breaks (False)."""
        if not self.init():
            return False
        self.consumer = Consumer({
            **self.workload.client_config, **self.workload.consumer_config,
            "group.id": f"jepsen-txn-reader-{self.client.slot}", "enable.auto.commit": False,
            "enable.partition.eof": False})
        try:
            partitions = list(range(self.workload.partitions))
            self.consumer.assign([TopicPartition(self.workload.topic, p, OFFSET_END) for p in partitions])
            self.history.event(self.process, "assign", partitions=partitions, start="end")
            while not self.workload.stopping.is_set():
                if not self.transaction():
                    return False
                time.sleep(self.client.interval_s)
            return True
        finally:
            self.consumer.close()

    def init(self):
        op = self.history.invoke(self.process, "init", transactional_id=self.client.transactional_id)
        deadline = time.monotonic() + INIT_PATIENCE_S
        while True:
            try:
                self.producer.init_transactions(INIT_TIMEOUT_S)
                self.history.complete(op, self.process, "init", OK)
                return True
            except KafkaException as exception:
                text, error = _error(exception)
                if not error.retriable() or time.monotonic() > deadline:
                    self.history.complete(op, self.process, "init", INFO, error=text)
                    return False

    def plan(self):
        """The micro-operations of the next transaction: its sends, and maybe one read among them."""
        count = self.rng.randint(*VALUES_PER_TXN)
        partitions = self.rng.sample(range(self.workload.partitions),
                                     self.rng.randint(1, min(PARTITIONS_PER_TXN_MAX, count)))
        mops = [["send", partitions[index % len(partitions)], next(self.values)] for index in range(count)]
        if self.rng.random() < READ_PROBABILITY:
            mops.insert(self.rng.randint(0, count), ["poll"])
        return mops

    def transaction(self):
        """One transaction, recorded; whether the session can go on."""
        mops = self.plan()
        abort = self.rng.random() < ABORT_PROBABILITY
        op = self.history.invoke(self.process, "txn", mops=mops, abort=abort)
        done = [list(mop) for mop in mops]
        self.delivered = {}
        try:
            self.producer.begin_transaction()
            for index, mop in enumerate(mops):
                if mop[0] == "send":
                    self._send(index, mop[1], mop[2])
                else:
                    done[index].append(self._read(op, index))
            self.producer.flush(FLUSH_TIMEOUT_S)
        except (KafkaException, BufferError) as exception:
            return self._abandon(op, done, exception)
        return self._end(op, done, abort)

    def _send(self, index, partition, value):
        offsets = self.delivered  # this transaction's, even if the report comes late

        def delivered(error, message):
            offsets[index] = message.offset() if error is None else None
        self.producer.produce(self.workload.topic, key=f"k{partition}", value=str(value), partition=partition,
                              on_delivery=delivered)
        self.producer.poll(0)

    def _read(self, op, index):
        """A poll of the session's consumer; its op id, or None when it failed."""
        return poll(self.consumer, self.history, self.process, self.positions, txn=op, mop=index)

    def _fill(self, done):
        self.producer.poll(0)
        for index, mop in enumerate(done):
            if mop[0] == "send":
                mop.append(self.delivered.get(index))

    def _end_call(self, end):
        """Commits or aborts, trying a retriable error again; the KafkaError, or None."""
        for attempt in range(END_ATTEMPTS):
            try:
                end(END_TIMEOUT_S)
                return None
            except KafkaException as exception:
                error = exception.args[0]
                if not error.retriable() or attempt == END_ATTEMPTS - 1:
                    return error

    def _end(self, op, done, abort):
        if abort:
            error = self._end_call(self.producer.abort_transaction)
            self._fill(done)
            self._complete(op, FAIL, done, aborted=error is None, error=error)
            return error is None
        error = self._end_call(self.producer.commit_transaction)
        if error is None:
            self._fill(done)
            self._complete(op, OK, done)
            return True
        if not error.txn_requires_abort():
            self._fill(done)
            self._complete(op, INFO, done, error=error)
            return False
        abort_error = self._end_call(self.producer.abort_transaction)
        self._fill(done)
        if abort_error is None:
            self._complete(op, FAIL, done, aborted=True, error=error)
            return True
        self._complete(op, INFO, done, error=error, abort_error=abort_error)
        return False

    def _abandon(self, op, done, exception):
        """An error before the commit was requested: the transaction cannot have committed."""
        text, error = _error(exception)
        fatal = error is not None and error.fatal()
        abort_error = error if fatal else self._end_call(self.producer.abort_transaction)
        self._fill(done)
        self._complete(op, FAIL, done, aborted=abort_error is None, error=text)
        return abort_error is None

    def _complete(self, op, outcome, done, **fields):
        fields = {key: str(value) if key.endswith("error") else value
                  for key, value in fields.items() if value is not None}
        self.history.complete(op, self.process, "txn", outcome, mops=done, **fields)


class TxnWorkload(Workload):
    """The transactional clients, the queue's consumers reading read_committed, and a final read
    once no transaction is open."""

    consumer_config = {"isolation.level": "read_committed"}

    def __init__(self, bootstrap, topic, partitions, history, seed, producers=3, subscribers=2, assigners=1,
                 rate_per_s=10, client_log=None):
        super().__init__(bootstrap, topic, partitions, history, seed, producers=0, subscribers=subscribers,
                         assigners=assigners, client_log=client_log)
        self.clients = [TxnClient(self, f"txn-{i}", seed, i, rate_per_s) for i in range(producers)] + self.clients

    def final_read(self):
        self.await_stable()
        return super().final_read()

    def await_stable(self):
        """Until every partition's read_committed end (its last stable offset) is its high
        watermark: no transaction open. A `stable` event says whether that happened in time."""
        readers = {isolation: Consumer({**self.client_config, "group.id": "jepsen-stable",
                                        "isolation.level": isolation})
                   for isolation in ("read_committed", "read_uncommitted")}
        deadline = time.monotonic() + STABLE_TIMEOUT_S
        ends = {}
        try:
            while time.monotonic() < deadline:
                ends = {isolation: self._ends(reader) for isolation, reader in readers.items()}
                if ends["read_committed"] == ends["read_uncommitted"]:
                    self.history.event(self.processes.next(), "stable", ends=ends["read_committed"])
                    return True
                time.sleep(0.5)
        finally:
            for reader in readers.values():
                reader.close()
        self.history.event(self.processes.next(), "stable", INFO, ends=ends)
        return False

    def _ends(self, reader):
        try:
            return {p: reader.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1]
                    for p in range(self.partitions)}
        except KafkaException:
            return None
