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
- Consume-transform-produce (a seeded share, CTP_SHARE): instead, a transaction polls 1-4 records
  of the topic through the session's input consumer (read_committed, assigned every partition from
  the committed offsets of the id's own group, `jepsen-txn-ctp-N`), sends a new value for each,
  and sends the positions after them to the transaction (send_offsets_to_transaction with the
  consumer's group metadata) before it commits or aborts. When it does not commit, the input
  consumer reads the group's committed offsets again and goes back there: each input is processed
  until a commit takes it, and only once.
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
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, Producer, TopicPartition

from history import FAIL, INFO, OK
from workload import VALUES_PER_PROCESS, Client, Workload, poll, poll_records, read_committed

TXN_TIMEOUT_MS = 20000
# librdkafka requires message.timeout.ms <= transaction.timeout.ms.
MESSAGE_TIMEOUT_MS = 15000
END_TIMEOUT_S = 30
END_ATTEMPTS = 3
INIT_TIMEOUT_S = 20
INIT_PATIENCE_S = 60
FLUSH_TIMEOUT_S = 20
ABORT_PROBABILITY = 0.2
TXN_CLIENTS = 3
TRANSACTIONAL_ID_PREFIX = "jepsen-txn-"
# The share of transactions that consume, transform and produce (the default of run.py's --ctp-share).
CTP_SHARE = 0.25
CTP_GROUP_PREFIX = "jepsen-txn-ctp-"
INPUTS_PER_CTP_TXN = (1, 4)
READ_PROBABILITY = 0.4
VALUES_PER_TXN = (1, 4)
PARTITIONS_PER_TXN_MAX = 3
BROKEN_SESSION_PAUSE_S = 1.0
# librdkafka's send_offsets_to_transaction may block past its timeout (librdkafka issues 5456 and
# 5511, open: a group coordinator it holds as down is not looked up again; seen here after a pause
# of that broker had healed): the session waits SEND_OFFSETS_GRACE_S longer, then gives the
# transaction up (it never asked for the commit) and ends, leaving the call to its thread.
SEND_OFFSETS_TIMEOUT_S = 10
SEND_OFFSETS_GRACE_S = 5
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
        self.transactional_id = f"{TRANSACTIONAL_ID_PREFIX}{slot}"
        self.ctp_group = f"{CTP_GROUP_PREFIX}{slot}"
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
        self.consumer = None
        self.input = None  # the consume-transform-produce input (CtpInput), opened at its first use
        self.extra = {}  # more fields of the transaction's completion
        self.outcome = None  # the last transaction's
        self.fatal = None  # a fatal error poll() raised
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
                ctp = self.rng.random() < self.workload.ctp_share
                if not (self.ctp_transaction() if ctp and self._input_ready() else self.transaction()):
                    return False
                time.sleep(self.client.interval_s)
            return True
        finally:
            self.consumer.close()
            if self.input is not None:
                self.input.consumer.close()

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

    def _input_ready(self):
        """Opens the consume-transform-produce input at its first use; False while the group's
        committed offsets cannot be read (the session never starts it anywhere else)."""
        if self.input is None:
            self.input = CtpInput(self)
        return self.input.ready or self.input.start()

    def ctp_transaction(self):
        """A consume-transform-produce transaction: a poll of 1-4 input records (the topic itself,
        through the session's consumer of its ctp group, from the group's committed offsets), a
        new value sent for each (`derived`: [value, input partition, input offset, input value]),
        the positions after them sent to the transaction for the group, then the commit or (seeded)
        abort. Unless it committed, the input goes back to the group's committed offsets."""
        source = self.input
        limit = self.rng.randint(*INPUTS_PER_CTP_TXN)
        abort = self.rng.random() < ABORT_PROBABILITY
        op = self.history.invoke(self.process, "txn", mops=[["poll"]], abort=abort, group=source.group)
        done = [["poll"]]
        self.delivered, self.outcome, offsets_sent = {}, None, None
        self.extra = {"group": source.group, "derived": []}
        records = []
        try:
            self.producer.begin_transaction()
            read, records = poll_records(source.consumer, self.history, source.process, source.positions,
                                         batch=limit, txn=op, mop=0)
            done[0].append(read)
            if read is None:
                source.lost = True  # the consumer's position is unknown
            for partition, offset, value in records:
                derived = next(self.values)
                index = len(done)
                out = self.rng.randrange(self.workload.partitions)
                done.append(["send", out, derived])
                self.extra["derived"].append([derived, partition, offset, value])
                self._send(index, out, derived)
            if records:
                offsets = {}
                for partition, offset, _ in records:
                    offsets[partition] = max(offsets.get(partition, 0), offset + 1)
                self.extra["offsets"] = offsets_sent = offsets
                self._send_offsets(offsets, source.consumer.consumer_group_metadata())
            self.producer.flush(FLUSH_TIMEOUT_S)
        except (KafkaException, BufferError) as exception:
            going_on = self._abandon(op, done, exception)
        except StuckCall as stuck:
            self._fill(done)
            self._complete(op, FAIL, done, aborted=False, error=str(stuck))
            going_on = False
        else:
            going_on = self._end(op, done, abort)
        source.ended(self.outcome, offsets_sent, bool(records))
        return going_on

    def _send_offsets(self, offsets, metadata):
        """send_offsets_to_transaction in a thread of its own, so that a call that never returns
        (see SEND_OFFSETS_GRACE_S) cannot hold the session: StuckCall when it does not."""
        outcome = []

        def call():
            try:
                self.producer.send_offsets_to_transaction(
                    [TopicPartition(self.workload.topic, p, o) for p, o in sorted(offsets.items())],
                    metadata, SEND_OFFSETS_TIMEOUT_S)
                outcome.append(None)
            except Exception as exception:  # noqa: BLE001 - raised again in the session's thread
                outcome.append(exception)
        caller = threading.Thread(target=call, daemon=True, name=f"send-offsets-{self.process}")
        caller.start()
        caller.join(SEND_OFFSETS_TIMEOUT_S + SEND_OFFSETS_GRACE_S)
        if not outcome:
            raise StuckCall(f"send_offsets_to_transaction did not return in "
                            f"{SEND_OFFSETS_TIMEOUT_S + SEND_OFFSETS_GRACE_S} s")
        if outcome[0] is not None:
            raise outcome[0]

    def _send(self, index, partition, value):
        offsets = self.delivered  # this transaction's, even if the report comes late

        def delivered(error, message):
            offsets[index] = message.offset() if error is None else None
        self.producer.produce(self.workload.topic, key=f"k{partition}", value=str(value), partition=partition,
                              on_delivery=delivered)
        self._serve()
        if self.fatal is not None:
            raise self.fatal

    def _read(self, op, index):
        """A poll of the session's consumer; its op id, or None when it failed."""
        return poll(self.consumer, self.history, self.process, self.positions, txn=op, mop=index)

    def _fill(self, done):
        self._serve()
        for index, mop in enumerate(done):
            if mop[0] == "send":
                mop.append(self.delivered.get(index))

    def _serve(self):
        """Serves the delivery reports. poll() raises a fatal error (a fenced producer, a failed
        EndTxn) as an exception: the session's transactional calls report it, so here it is only
        kept, not let out of the session (it would end the client)."""
        try:
            self.producer.poll(0)
        except KafkaException as exception:
            self.fatal = exception

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
        self.history.complete(op, self.process, "txn", outcome, mops=done, **self.extra, **fields)
        self.extra, self.outcome = {}, outcome


class StuckCall(RuntimeError):
    """A client call that did not return in time (the session gives it up)."""


class CtpInput:
    """The input of a session's consume-transform-produce transactions: a read_committed consumer
    of the session's ctp group (its own process number: its positions are its own), assigned every
    partition of the topic from the group's committed offsets (from the start when there are
    none). It moves the group's offsets only through send_offsets_to_transaction."""

    def __init__(self, session):
        self.session = session
        self.workload, self.history = session.workload, session.history
        self.group = session.client.ctp_group
        self.process = self.workload.processes.next()
        self.consumer = Consumer({
            **self.workload.client_config, **self.workload.consumer_config, "group.id": self.group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": False})
        self.ready, self.lost = False, False
        self.committed = {}  # partition -> the group's committed offset as this session knows it
        self.positions = {}

    def start(self):
        """Reads the group's committed offsets and starts there; False when the read failed."""
        partitions = list(range(self.workload.partitions))
        found = read_committed(self.consumer, self.history, self.process, self.group, self.workload.topic,
                               partitions)
        if found is None:
            return False
        self.committed = {p: o for p, o in found.items() if o >= 0}
        self.rewind()
        self.ready = True
        return True

    def rewind(self):
        """Back to the committed offsets (a reset of the consumer's positions in the history)."""
        partitions = list(range(self.workload.partitions))
        start = {p: self.committed.get(p, -1) for p in partitions}
        self.consumer.assign([TopicPartition(self.workload.topic, p, o if o >= 0 else OFFSET_BEGINNING)
                              for p, o in start.items()])
        self.history.event(self.process, "assign", partitions=partitions, start=start)
        self.positions = dict(self.committed)
        self.lost = False

    def ended(self, outcome, offsets, moved):
        """After a transaction: a commit moved the group's offsets to `offsets`; anything else
        leaves them where they were, so when the poll had moved the input, it reads the group's
        committed offsets again (what the broker says, not what the session remembers: a read
        right after an abort) and goes back there. When that read fails, the next
        consume-transform-produce transaction tries it first."""
        if outcome == OK:
            self.committed.update(offsets or {})
        elif moved or self.lost:
            self.ready = False
            self.start()


class TxnWorkload(Workload):
    """The transactional clients, the queue's consumers reading read_committed, and a final read
    once no transaction is open."""

    consumer_config = {"isolation.level": "read_committed"}

    def __init__(self, bootstrap, topic, partitions, history, seed, producers=TXN_CLIENTS, subscribers=2,
                 assigners=1, rate_per_s=10, client_log=None, ctp_share=CTP_SHARE):
        super().__init__(bootstrap, topic, partitions, history, seed, producers=0, subscribers=subscribers,
                         assigners=assigners, client_log=client_log)
        self.ctp_share = ctp_share
        self.clients = [TxnClient(self, f"txn-{i}", seed, i, rate_per_s) for i in range(producers)] + self.clients
        if ctp_share > 0:
            self.groups.update(client.ctp_group for client in self.clients[:producers])

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
