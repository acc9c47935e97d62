"""The history file of a queue or transactional run: its format, its writer and its reader (one
place for all three).

A history is JSON Lines. The first line is the header: {"type": "header", "seed": S, "topic": T,
"partitions": N, ...}. Every other line is one event of one operation:

- {"type": "invoke", "id": I, "process": P, "f": F, "time": NS, ...invocation fields}
- {"type": "ok" | "fail" | "info", "id": I, "process": P, "f": F, "time": NS, ...completion fields}

`id` pairs an invocation with its completion; `time` is nanoseconds since the run began (one
monotonic clock). "ok" means the operation certainly happened, "fail" that it certainly did not,
"info" that it may or may not have (a timeout, a lost connection). An operation with no completion
line is indeterminate as "info" is. The operations (`f`) and their fields:

- send: invoke {partition, key, value}; ok {offset}. One record, idempotent, acks=all.
- poll: ok {records: [[partition, offset, value], ...]} in the order the consumer returned them.
  A poll of the final read carries "final": true.
- commit: invoke {group, offsets: {partition: offset}}; ok repeats the offsets it committed.
- committed: invoke {group, partitions}; ok {offsets: {partition: offset}} (the group's committed
  offsets, -1001 for none).
- assign / subscribe / rebalance: the consumer's partitions changed (invoke and ok at once,
  {partitions}); polls before and after it are not compared for skips or order.
- final-read: ok {ends: {partition: end offset}} once the final read reached every end.
- fault: invoke/ok (or info) {name, target}: a fault began or healed (for the table only).

The transactional workload (txn_workload.py) adds:

- txn: invoke {mops: [["send", partition, value] | ["poll"], ...], abort}: one transaction of one
  transactional producer session, its micro-operations in the order the client does them. ok: it
  committed; fail: it certainly did not (aborted as planned, or the commit was never requested, or
  an abort after a failed commit succeeded); info: unknown (a commit that failed without a
  successful abort, a fatal error). Every completion carries {mops: [["send", partition, value,
  offset or null], ["poll", poll id or null], ...]}: each send's offset when its delivery report
  gave one, each read's poll op (null: the poll failed). A ["poll"] returned before any later send
  of its transaction was produced (its records may have been fetched before earlier sends were:
  librdkafka prefetches).
- poll with {txn: T, mop: I}: the read of mop I of txn T, by that session's read_committed consumer
  (or, in a consume-transform-produce transaction, by its input consumer, a process of its own).
- txn of consume-transform-produce: invoke {mops: [["poll"]], abort, group}; its completion adds
  the sends it derived from what the poll returned, `derived` ([[value, input partition, input
  offset, input value], ...]) and, once the poll returned records, `offsets` ({partition: offset}:
  the positions after them, sent to the transaction for `group` by send_offsets_to_transaction;
  present even when that call or the commit then failed). The group's offsets are read with
  `committed` ops of the input consumer's process (at its start, and after each transaction that
  read input and did not commit) and of the final read.
- init: a transactional producer session's init_transactions (invoke, then ok or info).
- stable: ok {ends} once no transaction was open on any partition before the final read (the
  read_committed end offsets equal the high watermarks), info when that did not happen in time.

In the header, "workload" is "queue" (absent in older histories) or "txn".

A process is one client session: a consumer or producer that is closed and opened again takes a
new process number, as Jepsen's processes do after a crash. This module never judges a history:
the checker does."""

import json
import threading
import time

HEADER = "header"
INVOKE = "invoke"
OK = "ok"
FAIL = "fail"
INFO = "info"
COMPLETIONS = (OK, FAIL, INFO)


class HistoryWriter:
    """Appends events to a history file from many threads; `invoke` returns the id that the
    completion (`complete`) must carry."""

    def __init__(self, path, header):
        self._file = open(path, "w")
        self._lock = threading.Lock()
        self._next_id = 0
        self._started = time.monotonic_ns()
        self._write(dict(header, type=HEADER))

    def _write(self, event):
        line = json.dumps(event, separators=(",", ":"))
        with self._lock:
            self._file.write(line + "\n")

    def now(self):
        return time.monotonic_ns() - self._started

    def invoke(self, process, f, **fields):
        with self._lock:
            op_id = self._next_id
            self._next_id += 1
        self._write(dict(fields, type=INVOKE, id=op_id, process=process, f=f, time=self.now()))
        return op_id

    def complete(self, op_id, process, f, outcome, **fields):
        assert outcome in COMPLETIONS, outcome
        self._write(dict(fields, type=outcome, id=op_id, process=process, f=f, time=self.now()))

    def event(self, process, f, outcome=OK, **fields):
        """An operation that completes as it is invoked (a rebalance, a fault's start)."""
        op_id = self.invoke(process, f, **fields)
        self.complete(op_id, process, f, outcome, **fields)
        return op_id

    def close(self):
        with self._lock:
            self._file.close()


class Op:
    """One operation: its invocation and completion merged. `outcome` is None when the history
    ends before the completion (indeterminate, as "info")."""

    __slots__ = ("id", "process", "f", "invoke_time", "complete_time", "outcome", "invocation", "completion")

    def __init__(self, invoke):
        self.id = invoke["id"]
        self.process = invoke["process"]
        self.f = invoke["f"]
        self.invoke_time = invoke["time"]
        self.complete_time = None
        self.outcome = None
        self.invocation = invoke
        self.completion = {}

    def get(self, field, default=None):
        """A field of the completion, else of the invocation."""
        if field in self.completion:
            return self.completion[field]
        return self.invocation.get(field, default)

    def __repr__(self):
        return f"Op({self.f} #{self.id} p{self.process} {self.outcome} {self.completion or self.invocation})"


class MalformedHistory(ValueError):
    """A line that is not an event, or a completion without its invocation."""


def parse(lines):
    """(header, [Op] in invocation order) of a history's lines."""
    header = None
    ops = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as error:
            raise MalformedHistory(f"line {number}: {error}") from error
        kind = event.get("type")
        if kind == HEADER:
            header = event
        elif kind == INVOKE:
            ops[event["id"]] = Op(event)
        elif kind in COMPLETIONS:
            op = ops.get(event["id"])
            if op is None:
                raise MalformedHistory(f"line {number}: completion of unknown op {event['id']}")
            op.outcome = kind
            op.complete_time = event["time"]
            op.completion = event
        else:
            raise MalformedHistory(f"line {number}: unknown event type {kind!r}")
    if header is None:
        raise MalformedHistory("no header line (the run's seed)")
    return header, sorted(ops.values(), key=lambda op: (op.invoke_time, op.id))


def read(path):
    with open(path) as history:
        return parse(history)
