"""The queue checker: reads a history (history.py) and counts every anomaly of Jepsen's queue
workload for Kafka-compatible logs (the definitions of the Redpanda 2022 and Bufstream 2024
analyses, restated here; none of their code). Pure: it reads operations and returns counts and
examples, it never talks to a broker.

Each partition is one of Jepsen's keys. The checker first gathers everything the history proves
about each partition's log: the offset an acknowledged send was given, and every record a poll
returned. Then:

- inconsistent-offsets: one (partition, offset) holding two different values.
- duplicate: one value at two or more (partition, offset) places (every value is sent once).
- lost-write: an acknowledged send whose value no poll ever returned, although a poll returned a
  record at a higher offset of its partition, or the final read (which reads every partition from
  its start to its end once faults healed) completed. Without a completed final read and without a
  higher offset seen, such a send is only `unseen`, which is reported and allowed.
- nonmonotonic-send: within one producer session, two acknowledged sends to one partition whose
  offsets are not in the order the sends were invoked (the idempotent producer keeps that order).
- nonmonotonic-poll: within one consumer session and without an assign, subscribe or rebalance in
  between, a poll returns a record of a partition at or below one it already returned. A rebalance
  recorded while a poll was under way (its callbacks run inside the poll) comes before that poll's
  records.
- poll-skip: likewise, a poll's next record of a partition is further along the partition's
  version order than the next one: records the consumer should have returned were skipped. The
  version order is every offset known to hold a record (offsets may be sparse), as Jepsen's is.
- committed-offset-regression: a read of a group's committed offset for a partition that returns
  less than an offset a commit of that group had already successfully committed before the read was
  invoked (consumers only commit forward; an old generation's commit is refused).

A session's failed or indeterminate poll forgets its positions (its records are unknown), so it
never causes a skip. Every class above is forbidden by Kafka's model for this non-transactional
workload: a run is clean when all counts are 0."""

import argparse
import bisect
import collections
import json
import sys

from history import FAIL, OK, read

EXAMPLES_PER_CLASS = 5

FORBIDDEN = ("lost-write", "duplicate", "inconsistent-offsets", "nonmonotonic-send",
             "nonmonotonic-poll", "poll-skip", "committed-offset-regression")
ALLOWED = ("unseen",)
# Operations after which a consumer's next poll may start anywhere.
POSITION_RESETS = ("assign", "subscribe", "rebalance")


class Report:
    """Counts per anomaly class, a few examples of each, and the run's figures. `forbidden` and
    `allowed` name the classes (the queue's by default; the transactional checker adds its own)."""

    def __init__(self, header, forbidden=FORBIDDEN, allowed=ALLOWED):
        self.header = header
        self.forbidden_classes, self.allowed_classes = tuple(forbidden), tuple(allowed)
        self.counts = {name: 0 for name in self.forbidden_classes + self.allowed_classes}
        self.examples = collections.defaultdict(list)
        self.figures = collections.Counter()

    def add(self, name, example):
        self.counts[name] += 1
        if len(self.examples[name]) < EXAMPLES_PER_CLASS:
            self.examples[name].append(example)

    @property
    def classes(self):
        return self.forbidden_classes + self.allowed_classes

    @property
    def forbidden(self):
        return sum(self.counts[name] for name in self.forbidden_classes)

    def as_dict(self):
        return {"seed": self.header.get("seed"), "figures": dict(self.figures), "counts": self.counts,
                "examples": dict(self.examples), "valid": self.forbidden == 0}


def _records(ops):
    """Every (process, partition, offset, value) an ok poll returned."""
    for op in ops:
        if op.f == "poll" and op.outcome == OK:
            for partition, offset, value in op.get("records", ()):
                yield op.process, partition, offset, value


def _acked_sends(ops):
    return [op for op in ops if op.f == "send" and op.outcome == OK]


def _placed_sends(ops):
    """Acknowledged sends whose offset the client reported. librdkafka acknowledges a retry the
    broker recognised as a duplicate of a batch older than the ones it keeps (Kafka's
    DUPLICATE_SEQUENCE_NUMBER) without an offset: such a send counts for lost-write by its value
    only."""
    return [op for op in _acked_sends(ops) if op.get("offset") is not None]


def check_offsets(ops, report):
    """inconsistent-offsets and duplicate, from acknowledged offsets and polled records."""
    values_at = collections.defaultdict(set)
    places_of = collections.defaultdict(set)
    for op in _placed_sends(ops):
        place = (op.get("partition"), op.get("offset"))
        values_at[place].add(op.get("value"))
        places_of[op.get("value")].add(place)
    for _, partition, offset, value in _records(ops):
        values_at[(partition, offset)].add(value)
        places_of[value].add((partition, offset))
    for place, values in sorted(values_at.items()):
        if len(values) > 1:
            report.add("inconsistent-offsets", {"partition": place[0], "offset": place[1],
                                                "values": sorted(values, key=str)})
    for value, places in places_of.items():
        if len(places) > 1:
            report.add("duplicate", {"value": value, "at": sorted(places)})
    return values_at


def check_lost(ops, report):
    """lost-write and unseen."""
    seen = {value for _, _, _, value in _records(ops)}
    highest = collections.defaultdict(lambda: -1)
    for _, partition, offset, _ in _records(ops):
        highest[partition] = max(highest[partition], offset)
    final_read = any(op.f == "final-read" and op.outcome == OK for op in ops)
    for op in _acked_sends(ops):
        value, partition, offset = op.get("value"), op.get("partition"), op.get("offset")
        if value in seen:
            continue
        example = {"value": value, "partition": partition, "offset": offset, "process": op.process}
        if final_read or (offset is not None and highest[partition] > offset):
            report.add("lost-write", dict(example, highest_read=highest[partition]))
        else:
            report.add("unseen", example)


def version_orders(values_at):
    """{partition: its known offsets in order} (the keys of `values_at` are (partition, offset))."""
    offsets = collections.defaultdict(set)
    for partition, offset in values_at:
        offsets[partition].add(offset)
    return {partition: sorted(known) for partition, known in offsets.items()}


def check_sends(ops, report):
    """nonmonotonic-send."""
    last = {}
    for op in sorted(_placed_sends(ops), key=lambda op: op.id):
        session = (op.process, op.get("partition"))
        offset = op.get("offset")
        if session in last and offset <= last[session][0]:
            report.add("nonmonotonic-send", {"process": op.process, "partition": op.get("partition"),
                                             "offsets": [last[session][0], offset],
                                             "values": [last[session][1], op.get("value")]})
        last[session] = (offset, op.get("value"))


def check_polls(ops, report, orders):
    """nonmonotonic-poll and poll-skip, per consumer session, in the order things happened to each
    session: by completion. A session is one thread, and its rebalance callbacks run inside a poll
    (between that poll's invocation and its completion), before the records that poll returns."""
    positions = collections.defaultdict(dict)  # process -> {partition: last offset returned}
    for op in sorted(ops, key=_completed_at):
        if op.f in POSITION_RESETS:
            positions[op.process].clear()
        elif op.f == "poll" and op.outcome != OK:
            positions[op.process].clear()
        elif op.f == "poll":
            last = positions[op.process]
            for partition, offset, value in op.get("records", ()):
                if partition in last:
                    _compare(report, op, partition, last[partition], offset, orders.get(partition, []))
                last[partition] = offset


def _completed_at(op):
    return (op.complete_time if op.complete_time is not None else op.invoke_time, op.id)


def _compare(report, op, partition, before, after, order):
    example = {"process": op.process, "partition": partition, "from": before, "to": after, "op": op.id}
    if after <= before:
        report.add("nonmonotonic-poll", example)
    else:
        # The known offsets strictly between the two (either may itself be unknown to the order:
        # the transactional checker's order holds committed records only).
        skipped = order[bisect.bisect_right(order, before):bisect.bisect_left(order, after)]
        if skipped:
            report.add("poll-skip", dict(example, skipped=skipped[:10]))


def check_committed(ops, report):
    """committed-offset-regression. A group's committed offset for a partition is a register its
    commits write. A read that returns `found` regresses when a commit acknowledged before the read
    was invoked wrote more than `found`, and every commit that wrote `found` had completed before
    that commit was invoked: no order of the commits puts `found` last. (A consumer may commit a
    lower offset, one that started over from the beginning when it could not read the committed
    offsets: such a commit, not finished before the higher one began, explains the read.)"""
    commits = [op for op in ops if op.f == "commit" and op.outcome != FAIL]
    for read_op in ops:
        if read_op.f != "committed" or read_op.outcome != OK:
            continue
        group = read_op.get("group")
        written = [(commit, offsets) for commit in commits if commit.get("group") == group
                   for offsets in [commit.get("offsets") or {}]]
        for partition, found in read_op.get("offsets", {}).items():
            found = int(found)
            writes = [commit for commit, offsets in written if partition in offsets]
            of_found = [commit for commit in writes if int(commit.get("offsets")[partition]) == found
                        and commit.invoke_time < read_op.complete_time]
            stale = [int(commit.get("offsets")[partition]) for commit in writes
                     if commit.outcome == OK and commit.complete_time < read_op.invoke_time
                     and int(commit.get("offsets")[partition]) > found
                     and not any(_may_follow(write, commit) for write in of_found)]
            if stale:
                report.add("committed-offset-regression", {"group": group, "partition": int(partition),
                                                           "read": found, "committed_before": max(stale),
                                                           "op": read_op.id})


def _may_follow(later, earlier):
    """Whether operation `later` may take effect after `earlier` (it did not finish before
    `earlier` began)."""
    return later.complete_time is None or later.complete_time > earlier.invoke_time


def check(header, ops):
    report = Report(header)
    values_at = check_offsets(ops, report)
    check_lost(ops, report)
    check_sends(ops, report)
    check_polls(ops, report, version_orders(values_at))
    check_committed(ops, report)
    report.figures.update({
        "ops": sum(1 for op in ops if op.f in ("send", "poll", "commit", "committed")),
        "sends_ok": len(_acked_sends(ops)),
        "records_read": sum(1 for _ in _records(ops)),
        **fault_figures(ops),
    })
    return report


def fault_figures(ops):
    """The figures every workload reports beside its own: faults begun and rebalances seen."""
    return {
        "faults": sum(1 for op in ops if op.f == "fault" and op.invocation.get("phase") == "start"
                      and op.outcome == OK),
        "rebalances": sum(1 for op in ops if op.f == "rebalance"),
    }


def check_file(path):
    return check(*read(path))


def table_header(classes=FORBIDDEN + ALLOWED):
    return "| seed | minutes | operations | faults | " + " | ".join(classes) + " |"


TABLE_HEADER = table_header()


def table_row(report, minutes):
    counts = " | ".join(str(report.counts[name]) for name in report.classes)
    return (f"| {report.header.get('seed')} | {minutes:.1f} | {report.figures['ops']} | "
            f"{report.figures['faults']} | {counts} |")


def command(check, description, argv=None):
    """The command line of a checker (this one's, txn_checker's): `check` reads the history file
    and returns its Report; exits 1 on any forbidden anomaly."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("history")
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
    args = parser.parse_args(argv)
    report = check(args.history)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        print(json.dumps(report.counts))
        for name, examples in report.examples.items():
            print(f"{name}: {examples}")
    return 0 if report.forbidden == 0 else 1


def main(argv=None):
    return command(check_file, "Count the anomalies of a queue history.", argv)


if __name__ == "__main__":
    sys.exit(main())
