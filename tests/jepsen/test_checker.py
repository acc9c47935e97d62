"""The checker can fail: one synthetic history per anomaly class, each written through the real
history writer and read back from its file, is caught with exactly that class; the clean history
they all start from passes. No broker is involved (these run in CI in well under a second)."""

import pytest

from checker import ALLOWED, FORBIDDEN, check_file, main
from history import FAIL, INFO, OK, HistoryWriter, MalformedHistory, parse

PARTITIONS = 2
GROUP = "g"


class Builder:
    """Writes a small history: producers 0 and 1, consumer 2 (assign) and the final reader 9."""

    def __init__(self, path):
        self.path = path
        self.writer = HistoryWriter(path, {"seed": 42, "topic": "t", "partitions": PARTITIONS})

    def send(self, process, partition, value, offset=None, outcome=OK):
        op = self.writer.invoke(process, "send", partition=partition, key=f"k{partition}", value=value)
        fields = {"offset": offset} if offset is not None else {}
        self.writer.complete(op, process, "send", outcome, **fields)

    def assign(self, process, partitions):
        self.writer.event(process, "assign", partitions=partitions)

    def rebalance(self, process, partitions):
        self.writer.event(process, "rebalance", partitions=partitions)

    def poll(self, process, records, outcome=OK, final=False):
        op = self.writer.invoke(process, "poll")
        self.writer.complete(op, process, "poll", outcome, records=records, final=final)

    def commit(self, process, offsets):
        op = self.writer.invoke(process, "commit", group=GROUP, offsets=offsets)
        self.writer.complete(op, process, "commit", OK, group=GROUP, offsets=offsets)

    def committed(self, process, offsets):
        op = self.writer.invoke(process, "committed", group=GROUP, partitions=list(offsets))
        self.writer.complete(op, process, "committed", OK, group=GROUP, offsets=offsets)

    def final_read(self, records, ends):
        self.assign(9, list(range(PARTITIONS)))
        self.poll(9, records, final=True)
        self.writer.event(9, "final-read", ends=ends)

    def report(self):
        self.writer.close()
        return check_file(self.path)


# The clean log: partition 0 holds values 0..3 at offsets 0..3, partition 1 holds 10..12.
LOG = {0: [0, 1, 2, 3], 1: [10, 11, 12]}


def records(partition, offsets, log=LOG):
    return [[partition, offset, log[partition][offset]] for offset in offsets]


def clean(builder, log=LOG, skip_final=False):
    """Sends, one consumer reading everything and committing, the final read."""
    for partition, values in log.items():
        for offset, value in enumerate(values):
            builder.send(partition % 2, partition, value, offset)
    builder.assign(2, [0, 1])
    builder.poll(2, records(0, [0, 1], log) + records(1, [0], log))
    builder.poll(2, records(0, [2, 3], log) + records(1, [1, 2], log))
    builder.commit(2, {0: 4, 1: 3})
    builder.committed(2, {0: 4, 1: 3})
    if not skip_final:
        builder.final_read(records(0, range(len(log[0])), log) + records(1, range(len(log[1])), log),
                           {p: len(v) for p, v in log.items()})


def only(report, name, count=1):
    """`name` counted `count` times and every other forbidden class 0."""
    others = {n: c for n, c in report.counts.items() if n != name and n in FORBIDDEN and c}
    assert report.counts[name] == count and not others, (report.counts, dict(report.examples))


@pytest.fixture
def builder(tmp_path):
    return Builder(tmp_path / "history.jsonl")


def test_a_clean_history_passes(builder):
    clean(builder)
    report = builder.report()
    assert report.forbidden == 0 and report.counts["unseen"] == 0, (report.counts, dict(report.examples))
    assert report.figures["sends_ok"] == 7 and report.header["seed"] == 42


def test_a_lost_write_is_caught_by_the_final_read(builder):
    log = {0: [0, 1, 2, 3], 1: [10, 11, 12]}
    clean(builder, log)
    builder.send(0, 0, 4, 4)  # acknowledged at offset 4, never read; the final read ended at 4
    report = builder.report()
    only(report, "lost-write")
    assert report.examples["lost-write"][0]["value"] == 4


def test_a_lost_write_is_caught_by_a_later_offset_without_a_final_read(builder):
    clean(builder, skip_final=True)
    builder.send(0, 0, 4, 4)
    builder.send(0, 0, 5, 5)
    builder.poll(2, [[0, 5, 5]])  # the consumer's next record after offset 3 is 5: 4 is lost
    report = builder.report()
    assert report.counts["lost-write"] == 1, report.counts
    assert report.examples["lost-write"][0]["value"] == 4
    # Offset 4 is known (acknowledged), so jumping from 3 to 5 is also a skip.
    assert report.counts["poll-skip"] == 1, report.counts


def test_an_acknowledged_write_not_yet_read_without_a_final_read_is_only_unseen(builder):
    clean(builder, skip_final=True)
    builder.send(0, 0, 4, 4)
    report = builder.report()
    assert report.forbidden == 0 and report.counts["unseen"] == 1, report.counts


def test_a_duplicate_is_caught(builder):
    log = {0: [0, 1, 2, 3, 1], 1: [10, 11, 12]}  # value 1 written at offsets 1 and 4
    clean(builder, log={0: [0, 1, 2, 3], 1: [10, 11, 12]}, skip_final=True)
    builder.poll(2, [[0, 4, 1]])
    builder.final_read(records(0, range(5), log) + records(1, range(3), log), {0: 5, 1: 3})
    only(builder.report(), "duplicate")


def test_inconsistent_offsets_are_caught(builder):
    clean(builder, skip_final=True)
    final = records(0, range(4)) + records(1, range(3))
    final[2] = [0, 2, 99]  # the final read finds 99 where 2 was acknowledged and polled
    builder.send(1, 0, 99, outcome=INFO)  # 99 was sent, indeterminately
    builder.final_read(final, {0: 4, 1: 3})
    report = builder.report()
    # Offset 2 holds two values; each value has one place, so there is no duplicate.
    only(report, "inconsistent-offsets")
    assert report.examples["inconsistent-offsets"][0]["values"] == [2, 99]


def test_a_nonmonotonic_send_is_caught(builder):
    clean(builder, skip_final=True)
    # Producer 0 sends 4 then 5 to partition 0; the acknowledgements put 5 before 4.
    builder.send(0, 0, 4, 5)
    builder.send(0, 0, 5, 4)
    log = {0: [0, 1, 2, 3, 5, 4], 1: [10, 11, 12]}
    builder.final_read(records(0, range(6), log) + records(1, range(3), log), {0: 6, 1: 3})
    only(builder.report(), "nonmonotonic-send")


def test_a_nonmonotonic_poll_is_caught(builder):
    clean(builder)
    builder.poll(2, records(0, [2]))  # back to offset 2 after 3, no rebalance in between
    only(builder.report(), "nonmonotonic-poll")


def test_a_poll_skip_is_caught(builder):
    log = {0: [0, 1, 2, 3], 1: [10, 11, 12]}
    for partition, values in log.items():
        for offset, value in enumerate(values):
            builder.send(partition, partition, value, offset)
    builder.assign(2, [0, 1])
    builder.poll(2, records(0, [0, 1]))
    builder.poll(2, records(0, [3]))  # offset 2 exists (acknowledged) and was skipped
    builder.final_read(records(0, range(4)) + records(1, range(3)), {0: 4, 1: 3})
    report = builder.report()
    only(report, "poll-skip")
    assert report.examples["poll-skip"][0]["skipped"] == [2]


def test_a_jump_after_a_rebalance_is_no_skip(builder):
    clean(builder, skip_final=True)
    builder.rebalance(2, [0])
    builder.poll(2, records(0, [1]))  # restarts from an older committed offset: allowed
    builder.final_read(records(0, range(4)) + records(1, range(3)), {0: 4, 1: 3})
    report = builder.report()
    assert report.forbidden == 0, report.counts


def test_a_rebalance_inside_a_poll_comes_before_its_records(builder):
    """librdkafka runs the revocation and assignment callbacks inside consume(): the rebalance is
    recorded after the poll's invocation, and the poll returns records from the committed offset."""
    clean(builder, skip_final=True)
    op = builder.writer.invoke(2, "poll")
    builder.rebalance(2, [0])
    builder.writer.complete(op, 2, "poll", OK, records=records(0, [1, 2, 3]))
    builder.final_read(records(0, range(4)) + records(1, range(3)), {0: 4, 1: 3})
    report = builder.report()
    assert report.forbidden == 0, report.counts


def test_a_send_acknowledged_without_an_offset_counts_by_its_value(builder):
    """librdkafka acknowledges a retry Kafka recognised as an old duplicate without an offset."""
    clean(builder, skip_final=True)
    builder.send(0, 0, 4)  # read back below: fine
    builder.send(0, 0, 99)  # never read, although the final read completed: lost
    log = {0: [0, 1, 2, 3, 4], 1: [10, 11, 12]}
    builder.final_read(records(0, range(5), log) + records(1, range(3), log), {0: 5, 1: 3})
    report = builder.report()
    only(report, "lost-write")
    assert report.examples["lost-write"][0]["value"] == 99


def test_a_gap_of_unknown_offsets_is_no_skip(builder):
    """Offsets may be sparse: only offsets known to hold a record count as skipped."""
    builder.send(0, 0, 0, 0)
    builder.send(0, 0, 3, 3)
    builder.assign(2, [0])
    builder.poll(2, [[0, 0, 0], [0, 3, 3]])
    builder.final_read([[0, 0, 0], [0, 3, 3]], {0: 4, 1: 0})
    assert builder.report().forbidden == 0


def test_a_committed_offset_going_backwards_is_caught(builder):
    clean(builder)
    builder.committed(2, {0: 2, 1: 3})  # 4 was committed to partition 0 before this read
    report = builder.report()
    only(report, "committed-offset-regression")
    assert report.examples["committed-offset-regression"][0]["committed_before"] == 4


def test_a_lower_commit_after_a_higher_one_is_no_regression(builder):
    """A consumer that could not read the committed offsets starts over and commits lower ones: the
    register's last write is the lower value."""
    clean(builder)
    builder.commit(2, {0: 1})
    builder.committed(2, {0: 1, 1: 3})
    assert builder.report().forbidden == 0


def test_committed_offsets_lost_altogether_are_a_regression(builder):
    clean(builder)
    builder.committed(2, {0: -1001, 1: -1001})
    only(builder.report(), "committed-offset-regression", count=2)


def test_a_failed_or_indeterminate_poll_forgets_positions_and_failed_sends_are_not_lost(builder):
    clean(builder, skip_final=True)
    builder.poll(2, [], outcome=INFO)
    builder.poll(2, records(0, [3]))  # after an unknown poll: no order to compare with
    builder.send(0, 0, 77, outcome=FAIL)
    builder.send(1, 1, 78, outcome=INFO)
    builder.final_read(records(0, range(4)) + records(1, range(3)), {0: 4, 1: 3})
    assert builder.report().forbidden == 0


SYNTHETIC = {
    "lost-write": test_a_lost_write_is_caught_by_the_final_read,
    "duplicate": test_a_duplicate_is_caught,
    "inconsistent-offsets": test_inconsistent_offsets_are_caught,
    "nonmonotonic-send": test_a_nonmonotonic_send_is_caught,
    "nonmonotonic-poll": test_a_nonmonotonic_poll_is_caught,
    "poll-skip": test_a_poll_skip_is_caught,
    "committed-offset-regression": test_a_committed_offset_going_backwards_is_caught,
}


def test_every_forbidden_class_has_a_synthetic_history():
    assert set(SYNTHETIC) == set(FORBIDDEN) and set(ALLOWED) == {"unseen"}


def test_a_history_without_its_seed_or_with_an_orphan_completion_is_refused():
    with pytest.raises(MalformedHistory):
        parse(['{"type":"invoke","id":0,"process":0,"f":"poll","time":1}'])
    with pytest.raises(MalformedHistory):
        parse(['{"type":"header","seed":1}', '{"type":"ok","id":5,"process":0,"f":"poll","time":1}'])


def test_the_command_line_exits_1_on_an_anomaly(builder, capsys):
    clean(builder)
    builder.poll(2, records(0, [2]))
    builder.writer.close()
    assert main([str(builder.path)]) == 1
    assert "nonmonotonic-poll" in capsys.readouterr().out
