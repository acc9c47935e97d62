"""The transactional checker can fail: one synthetic history per anomaly class, each written
through the real history writer and read back from its file, is caught with exactly that class
counted; the clean history they start from passes; and what Kafka's model allows (an aborted
transaction never read, a transaction still open, indeterminate ones, write cycles, reads that
interleave with commits) is not counted as forbidden. No broker is involved (CI, well under a
second)."""

import pytest

import checker
from history import FAIL, INFO, OK, HistoryWriter
from test_checker import Builder as QueueBuilder
from txn_checker import ALLOWED, FORBIDDEN, check_file, main

SEND, POLL = "send", "poll"
CTP_GROUP = "ctp"


class Builder(QueueBuilder):
    """Writes a small history: transactional sessions 0-4 (each with its own read_committed
    reader), a consumer 5 (assign), another reader 6 and the final reader 9. The queue's builder
    gives it assign, poll, commit and committed."""

    def __init__(self, path):
        self.path = path
        self.writer = HistoryWriter(path, {"seed": 42, "topic": "t", "partitions": 2, "workload": "txn"})

    def txn(self, process, *mops, outcome=OK):
        """mops: (SEND, partition, value, offset or None) or (POLL, records); outcome None leaves
        the transaction without a completion (still open when the history ends)."""
        planned = [[SEND, mop[1], mop[2]] if mop[0] == SEND else [POLL] for mop in mops]
        op = self.writer.invoke(process, "txn", mops=planned, abort=outcome == FAIL)
        done = []
        for index, mop in enumerate(mops):
            if mop[0] == SEND:
                done.append([SEND, mop[1], mop[2], mop[3]])
            else:
                poll = self.writer.invoke(process, "poll", txn=op, mop=index)
                self.writer.complete(poll, process, "poll", OK, records=mop[1])
                done.append([POLL, poll])
        if outcome is not None:
            self.writer.complete(op, process, "txn", outcome, mops=done)
        return op

    def ctp(self, process, reader, inputs, outputs, offsets, outcome=OK):
        """A consume-transform-produce transaction of CTP_GROUP: `reader` (its input consumer)
        polls `inputs` ([partition, offset, value]), then one send per input, `outputs`: [(value,
        partition, offset)], and the offsets sent to the transaction."""
        mops = [[POLL]] + [[SEND, partition, value] for value, partition, _ in outputs]
        op = self.writer.invoke(process, "txn", mops=[[POLL]], abort=outcome == FAIL, group=CTP_GROUP)
        poll = self.writer.invoke(reader, "poll", txn=op, mop=0)
        self.writer.complete(poll, reader, "poll", OK, records=inputs)
        mops[0].append(poll)
        for mop, (_, _, offset) in zip(mops[1:], outputs):
            mop.append(offset)
        derived = [[value] + list(record) for (value, _, _), record in zip(outputs, inputs)]
        if outcome is not None:
            self.writer.complete(op, process, "txn", outcome, mops=mops, group=CTP_GROUP, derived=derived,
                                 offsets=offsets)
        return op

    def ctp_committed(self, process, offsets):
        op = self.writer.invoke(process, "committed", group=CTP_GROUP, partitions=list(offsets))
        self.writer.complete(op, process, "committed", OK, group=CTP_GROUP, offsets=offsets)

    def final_read(self, records, ends):
        self.assign(9, [0, 1])
        op = self.writer.invoke(9, "poll", final=True)
        self.writer.complete(op, 9, "poll", OK, records=records, final=True)
        self.writer.event(9, "final-read", ends=ends)

    def report(self):
        self.writer.close()
        return check_file(self.path)


# The clean log. Partition 0: T1's 1 at 0, T2's 3 at 2, T4's 5 at 4. Partition 1: T1's 2 at 0,
# the aborted T3's 4 at 2, T4's 6 at 4. (Odd offsets: the markers.)
FINAL = [[0, 0, 1], [0, 2, 3], [0, 4, 5], [1, 0, 2], [1, 4, 6]]
ENDS = {0: 6, 1: 6}


def clean(b, final=True, extra=(), ends=ENDS):
    b.txn(0, (SEND, 0, 1, 0), (SEND, 1, 2, 0))  # T1
    b.txn(1, (SEND, 0, 3, 2), (POLL, [[0, 0, 1], [1, 0, 2]]))  # T2 reads T1 after its own send
    b.txn(0, (SEND, 1, 4, 2), outcome=FAIL)  # T3, aborted, never read
    b.txn(1, (SEND, 0, 5, 4), (SEND, 1, 6, 4))  # T4
    b.assign(5, [0, 1])
    b.poll(5, [[0, 0, 1], [0, 2, 3], [1, 0, 2]])
    b.poll(5, [[0, 4, 5], [1, 4, 6]])  # steps over the aborted record at 1/2: no skip
    b.commit(5, {0: 5, 1: 5})
    b.committed(5, {0: 5, 1: 5})
    if final:
        b.final_read(FINAL + list(extra), ends)


def only(report, name, count=1):
    """`name` counted `count` times and every other forbidden class 0."""
    others = {n: c for n, c in report.counts.items() if n != name and n in FORBIDDEN and c}
    assert report.counts[name] == count and not others, (report.counts, dict(report.examples))


def nothing_forbidden(report):
    assert report.forbidden == 0, (report.counts, dict(report.examples))


@pytest.fixture
def b(tmp_path):
    return Builder(tmp_path / "history.jsonl")


def test_a_clean_history_passes(b):
    clean(b)
    report = b.report()
    nothing_forbidden(report)
    assert report.counts["unseen"] == 0 and report.counts["G0-allowed"] == 0, report.counts
    assert report.figures["txns_committed"] == 3 and report.figures["txns_aborted"] == 1, report.figures
    assert report.header["seed"] == 42


def test_an_aborted_read_is_caught(b):
    clean(b)
    b.assign(6, [1])
    b.poll(6, [[1, 0, 2], [1, 2, 4], [1, 4, 6]])  # 4 is the aborted T3's
    report = b.report()
    only(report, "aborted-read")
    assert report.examples["aborted-read"][0]["value"] == 4


def test_a_torn_transaction_read_through_is_caught(b):
    """T5's outcome is unknown; reader 6 saw its 7 and read through 0/7 without its 8. Offset 7
    holds nothing known to be committed, so this is no skip: only torn."""
    clean(b, final=False)
    b.txn(2, (SEND, 0, 7, 6), (SEND, 0, 8, 7), outcome=INFO)  # T5
    b.txn(0, (SEND, 0, 9, 8))  # T6
    b.assign(6, [0])
    b.poll(6, [[0, 6, 7], [0, 8, 9]])
    report = b.report()
    only(report, "torn-transaction")
    assert report.examples["torn-transaction"][0]["missing"] == 8


def test_a_final_read_with_part_of_a_transaction_is_torn(b):
    b.txn(2, (SEND, 0, 7, 6), (SEND, 1, 8, 6), outcome=INFO)  # T5: the final read has 7, not 8
    clean(b, extra=[[0, 6, 7]], ends={0: 8, 1: 8})
    report = b.report()
    only(report, "torn-transaction")
    assert report.examples["torn-transaction"][0]["missing"] == [8]


def test_a_committed_torn_read_also_shows_its_skip_and_lost_write(b):
    """When the transaction committed, the record the reader stepped over is known: the same read
    is also a skip, and (nothing read it, a later offset was read) a lost write."""
    clean(b, final=False)
    b.txn(2, (SEND, 0, 7, 6), (SEND, 0, 8, 7))  # committed
    b.txn(0, (SEND, 0, 9, 8))
    b.poll(5, [[0, 6, 7], [0, 8, 9]])
    counts = b.report().counts
    assert (counts["torn-transaction"], counts["poll-skip"], counts["lost-write"]) == (1, 1, 1), counts


def test_a_lost_committed_write_is_caught(b):
    b.txn(2, (SEND, 1, 10, 6))  # committed, never read although the final read completed
    clean(b, ends={0: 6, 1: 8})
    report = b.report()
    only(report, "lost-write")
    assert report.examples["lost-write"][0]["value"] == 10


def test_a_duplicate_is_caught(b):
    clean(b, extra=[[0, 6, 3]], ends={0: 7, 1: 6})  # T2's 3 at 0/2 and again at 0/6
    only(b.report(), "duplicate")


def test_inconsistent_offsets_are_caught(b):
    b.txn(2, (SEND, 0, 99, None), outcome=INFO)
    final = [list(record) for record in FINAL]
    final[1] = [0, 2, 99]  # the final read finds 99 where 3 was acknowledged (and read by 5)
    clean(b, final=False)
    b.final_read(final, ENDS)
    report = b.report()
    only(report, "inconsistent-offsets")
    assert report.examples["inconsistent-offsets"][0]["values"] == [3, 99]


def test_a_nonmonotonic_send_is_caught(b):
    clean(b, final=False)
    b.txn(0, (SEND, 0, 11, 9), (SEND, 0, 12, 8))  # one session's sends to 0, offsets reversed
    b.final_read(FINAL + [[0, 8, 12], [0, 9, 11]], {0: 10, 1: 6})
    only(b.report(), "nonmonotonic-send")


def test_a_nonmonotonic_poll_is_caught(b):
    clean(b)
    b.poll(5, [[0, 2, 3]])
    only(b.report(), "nonmonotonic-poll")


def test_a_poll_skip_is_caught(b):
    clean(b)
    b.assign(6, [0])
    b.poll(6, [[0, 0, 1]])
    b.poll(6, [[0, 4, 5]])  # over T2's committed 3 at 0/2 (6 read nothing of T2: a skip, not torn)
    report = b.report()
    only(report, "poll-skip")
    assert report.examples["poll-skip"][0]["skipped"] == [2]


def test_a_committed_offset_going_backwards_is_caught(b):
    clean(b)
    b.committed(5, {0: 2, 1: 5})
    only(b.report(), "committed-offset-regression")


# Consume-transform-produce: reader 7 (session 2's input consumer) reads the clean log for group
# CTP_GROUP. Tc1 derives 80 (0/6) and 81 (1/6) from 1 and 2 and commits offsets {0: 1, 1: 1}; Tc2
# derives 82 (0/8) from 3 and aborts with {0: 3}; the reader goes back to {0: 1}; Tc3 derives 83
# (0/10) from 3 again and commits {0: 3}. The group's offsets read back: {0: 3, 1: 1}.
CTP_FINAL = FINAL + [[0, 6, 80], [0, 10, 83], [1, 6, 81]]
CTP_ENDS = {0: 12, 1: 8}


def ctp_clean(b, after_abort=lambda: None, final=True):
    clean(b, final=False)
    b.assign(7, [0, 1])
    b.ctp_committed(7, {0: -1001, 1: -1001})
    b.ctp(2, 7, [[0, 0, 1], [1, 0, 2]], [(80, 0, 6), (81, 1, 6)], {0: 1, 1: 1})  # Tc1
    b.ctp(2, 7, [[0, 2, 3]], [(82, 0, 8)], {0: 3}, outcome=FAIL)  # Tc2
    after_abort()
    b.assign(7, [0, 1])  # back to the committed offsets
    b.ctp(2, 7, [[0, 2, 3]], [(83, 0, 10)], {0: 3})  # Tc3
    b.ctp_committed(8, {0: 3, 1: 1})
    if final:
        b.final_read(CTP_FINAL, CTP_ENDS)


def test_a_clean_consume_transform_produce_history_passes(b):
    """Also: the aborted Tc2's offset 3 read back after Tc3 sent the same offset is Tc3's."""
    ctp_clean(b)
    report = b.report()
    nothing_forbidden(report)
    assert report.figures["ctp_txns_committed"] == 2 and report.figures["ctp_inputs_committed"] == 3, \
        report.figures


def test_an_aborted_transactions_offsets_read_back_are_caught(b):
    ctp_clean(b, after_abort=lambda: b.ctp_committed(7, {0: 3, 1: 1}))  # only Tc2 had sent 3
    report = b.report()
    only(report, "uncommitted-offset-read")
    example = report.examples["uncommitted-offset-read"][0]
    assert (example["partition"], example["read"], len(example["aborted_txns"])) == (0, 3, 1), example


def test_group_offsets_no_transaction_sent_are_caught(b):
    ctp_clean(b)
    b.ctp_committed(8, {0: 3, 1: 5})  # nobody sent 5 for partition 1
    only(b.report(), "uncommitted-offset-read")


def test_an_unknown_transactions_offsets_read_back_are_not_counted(b):
    """Tc4's commit is unknown: its offsets read back mean it committed."""
    ctp_clean(b, final=False)
    b.assign(7, [0, 1])
    b.ctp(2, 7, [[0, 4, 5]], [(84, 1, 8)], {0: 5}, outcome=INFO)  # Tc4
    b.ctp_committed(8, {0: 5, 1: 1})
    b.final_read(CTP_FINAL + [[1, 8, 84]], {0: 12, 1: 10})
    nothing_forbidden(b.report())


def test_group_offsets_going_backwards_are_caught(b):
    ctp_clean(b)
    b.ctp_committed(8, {0: 1, 1: 1})  # Tc1's offset, after Tc3 committed 3
    report = b.report()
    only(report, "committed-offset-regression")
    assert report.examples["committed-offset-regression"][0]["group"] == CTP_GROUP


def test_an_input_processed_twice_is_caught(b):
    """A new input consumer (8) starts at {0: 1} after Tc3 committed {0: 3}, and Tc5 derives 84
    from the record at 0/2 again and commits: 3 has two derived values committed."""
    ctp_clean(b, final=False)
    b.assign(8, [0, 1])
    b.ctp(3, 8, [[0, 2, 3]], [(84, 1, 8)], {0: 3})  # Tc5
    b.final_read(CTP_FINAL + [[1, 8, 84]], {0: 12, 1: 10})
    report = b.report()
    only(report, "reprocessed-input")
    example = report.examples["reprocessed-input"][0]
    assert (example["partition"], example["offset"]) == (0, 2), example
    assert [value for _, value in example["txns_and_values"]] == [83, 84], example


def test_circular_information_flow_is_g1c(b):
    """T7 and T8 each read the other's record: each read needs the other's commit first, and each
    commit comes after its own read."""
    clean(b, final=False)
    b.txn(3, (SEND, 0, 20, 6), (POLL, [[1, 6, 21]]))  # T7 reads T8's 21
    b.txn(4, (SEND, 1, 21, 6), (POLL, [[0, 6, 20]]))  # T8 reads T7's 20
    b.final_read(FINAL + [[0, 6, 20], [1, 6, 21]], {0: 8, 1: 8})
    report = b.report()
    only(report, "G1c")
    assert "wr->" in " ".join(report.examples["G1c"][0]["cycle"])


def test_a_read_before_the_sends_it_would_have_to_follow_is_g1c(b):
    """T9 polls first and then sends 50, which lands ahead of T10's 51 in partition 1; yet its poll
    read T10's 52, so T10 committed before that poll, after its own 51 was appended: 50 would have
    to be appended before itself was sent."""
    clean(b, final=False)
    b.txn(4, (SEND, 0, 52, 6), (SEND, 1, 51, 7))  # T10
    b.txn(3, (POLL, [[0, 6, 52]]), (SEND, 1, 50, 6))  # T9
    b.final_read(FINAL + [[0, 6, 52], [1, 6, 50], [1, 7, 51]], {0: 8, 1: 9})
    only(b.report(), "G1c")


def test_the_same_cycle_with_the_send_first_is_allowed(b):
    """T9 sends 50 first, then polls: T10 may append 51 behind it, commit, and be read."""
    clean(b, final=False)
    b.txn(4, (SEND, 0, 52, 6), (SEND, 1, 51, 7))  # T10
    b.txn(3, (SEND, 1, 50, 6), (POLL, [[0, 6, 52]]))  # T9
    b.final_read(FINAL + [[0, 6, 52], [1, 6, 50], [1, 7, 51]], {0: 8, 1: 9})
    report = b.report()
    nothing_forbidden(report)
    assert report.counts["G1c-allowed"] == 1, report.counts
    assert "not isolated" in report.examples["G1c-allowed"][0]["reason"]


def test_a_write_cycle_is_allowed(b):
    """T11 and T12 interleave in opposite orders in the two partitions: Kafka does not isolate
    concurrent transactions' writes."""
    clean(b, final=False)
    b.txn(3, (SEND, 0, 40, 6), (SEND, 1, 41, 7))
    b.txn(4, (SEND, 0, 42, 7), (SEND, 1, 43, 6))
    b.final_read(FINAL + [[0, 6, 40], [0, 7, 42], [1, 6, 43], [1, 7, 41]], {0: 8, 1: 8})
    report = b.report()
    nothing_forbidden(report)
    assert report.counts["G0-allowed"] == 1 and report.counts["G1c-allowed"] == 0, report.counts


def test_a_write_cycle_with_polls_between_the_sends_is_still_allowed(b):
    """T13 sends 30, polls, sends 31; T14 sends 32, polls, sends 33; partition 1 has 31 before 32,
    partition 0 has 33 before 30. Were a poll a point between its transaction's sends, each first
    send would follow its own second one; but a poll may return records fetched before the send
    that preceded it (librdkafka prefetches), so nothing orders 30 before 31: still only a G0."""
    clean(b, final=False)
    b.txn(3, (SEND, 0, 30, 7), (POLL, []), (SEND, 1, 31, 6))
    b.txn(4, (SEND, 1, 32, 7), (POLL, []), (SEND, 0, 33, 6))
    b.final_read(FINAL + [[0, 6, 33], [0, 7, 30], [1, 6, 31], [1, 7, 32]], {0: 8, 1: 8})
    report = b.report()
    nothing_forbidden(report)
    assert report.counts["G0-allowed"] == 1, report.counts


def test_an_aborted_transaction_never_read_and_an_unknown_one_are_not_counted(b):
    b.txn(2, (SEND, 0, 70, 6), outcome=INFO)  # unknown, never read: aborted after all
    b.txn(2, (SEND, 1, 71, None), outcome=INFO)  # unknown, no offset, never read
    b.txn(3, (SEND, 1, 72, 6), outcome=FAIL)  # aborted (T3 of clean() is another)
    b.txn(4, (SEND, 0, 73, 8), (SEND, 1, 74, 8), outcome=INFO)  # unknown, read whole: committed
    clean(b, extra=[[0, 8, 73], [1, 8, 74]], ends={0: 10, 1: 10})
    report = b.report()
    nothing_forbidden(report)
    assert report.counts["unseen"] == 0, report.counts


def test_a_transaction_behind_an_open_one_not_read_yet_is_only_unseen(b):
    """T15 is still open at 1/6 (its commit never completed), so the last stable offset holds at
    6 and T16's committed 61 at 1/8 cannot be read yet; without a final read that is `unseen`."""
    clean(b, final=False)
    b.txn(2, (SEND, 1, 60, 6), outcome=None)
    b.txn(3, (SEND, 1, 61, 8))
    report = b.report()
    nothing_forbidden(report)
    assert report.counts["unseen"] == 1, report.counts


SYNTHETIC = {
    "lost-write": test_a_lost_committed_write_is_caught,
    "duplicate": test_a_duplicate_is_caught,
    "inconsistent-offsets": test_inconsistent_offsets_are_caught,
    "nonmonotonic-send": test_a_nonmonotonic_send_is_caught,
    "nonmonotonic-poll": test_a_nonmonotonic_poll_is_caught,
    "poll-skip": test_a_poll_skip_is_caught,
    "committed-offset-regression": test_a_committed_offset_going_backwards_is_caught,
    "aborted-read": test_an_aborted_read_is_caught,
    "torn-transaction": test_a_torn_transaction_read_through_is_caught,
    "G1c": test_circular_information_flow_is_g1c,
    "uncommitted-offset-read": test_an_aborted_transactions_offsets_read_back_are_caught,
    "reprocessed-input": test_an_input_processed_twice_is_caught,
}


def test_every_forbidden_class_has_a_synthetic_history():
    assert set(SYNTHETIC) == set(FORBIDDEN)
    assert set(checker.FORBIDDEN) < set(FORBIDDEN), "the queue classes apply to transactions too"
    assert set(ALLOWED) == {"unseen", "G0-allowed", "G1c-allowed"}


def test_the_command_line_exits_1_on_an_anomaly(b, capsys):
    clean(b)
    b.poll(5, [[0, 2, 3]])
    b.writer.close()
    assert main([str(b.path)]) == 1
    assert "nonmonotonic-poll" in capsys.readouterr().out
