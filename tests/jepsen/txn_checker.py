"""The transactional checker: reads a history of the transactional workload (history.py's `txn`
op, txn_workload.py) and counts every anomaly of Jepsen's list-append view of Kafka transactions
(the definitions of the Redpanda 2022 and Bufstream 2024 analyses, restated; none of their code).
Pure, like checker.py, whose definitions it reuses for the queue classes rather than repeating them.

Each partition is a list that transactions append to; its offsets give the version order. A
transaction is committed (ok), aborted (fail) or unknown (info, or no completion). An unknown one
that any poll returned is taken as committed: a read_committed reader saw it. The queue classes
(checker.py) apply to the records of transactions:

- inconsistent-offsets, duplicate, nonmonotonic-send: over every send whose offset is known,
  whatever its transaction's fate (an aborted record still occupies its offset).
- lost-write (and the allowed `unseen`): over the sends of committed transactions only.
- nonmonotonic-poll, poll-skip: over every poll, in and out of transactions; the version order is
  the offsets known to hold committed records, so stepping over an aborted or undecided record
  is no skip.
- committed-offset-regression: the consumers' commits, as for the queue.

And the transactional ones:

- aborted-read: a (read_committed) poll returned a value of an aborted transaction. Counted once
  per value.
- torn-transaction: a reader saw some of a transaction's values but not one of its others that
  lies inside a range of a partition the reader read through (between two records one session
  returned with no reset in between), or the final read (every partition from its start to its
  end) has some of a transaction's values but not all. Counted once per reader and transaction.
- uncommitted-offset-read: a read of a consume-transform-produce group's committed offsets shows
  an offset that no transaction of that group which committed (or may have) had sent before the
  read ended: an aborted transaction's offsets, or offsets nobody sent. A group's offsets move
  only with a commit. (committed-offset-regression covers these groups too: their committed
  transactions are the commits of their offsets.)
- reprocessed-input: an input record from which two committed (or seen) transactions of one group
  derived values: the first commit moved the group past it, yet it was processed again. The
  consume-transform-produce loop is exactly-once only when this is 0.
- G0 and G1c: cycles of the dependency graph. Its nodes are the committed transactions; ww:
  T1 -> T2 when T2's record directly follows T1's in a partition; wr: T1 -> T2 when a poll of T2
  returned a record of T1. A cycle of ww edges only is G0, one with a wr edge G1c.

Kafka's model allows every G0 and some G1c. Kafka gives a record its offset when it is appended,
not when its transaction commits, and promises that a transaction's records become visible to
read_committed readers all at once; it does not isolate transactions from one another. So two
concurrent transactions may interleave in different orders in different partitions (the write
cycles Jepsen's Redpanda analysis found in Kafka's design, and that Redpanda's answer called
write-write conflicts of the protocol), and a poll inside a transaction is isolated from nothing:
it reads whatever committed before it, including a transaction that committed after this one's
earlier sends were appended ahead of its own. Neither is there read-your-writes: a transaction's
poll never returns its own sends (not committed yet), nor need a producer's next transaction see
its last commit (the markers are written after the commit returns), so neither process order nor
real time is an edge here.

To tell the cycles Kafka allows from those it forbids, the checker asks whether any order of
events explains them. Each transaction becomes events: an append per record, a fetch per poll
(when its records were read), a commit (its markers). Kafka's model orders them: a partition's
records are appended in offset order (ww); a read_committed reader fetches a record only after its
transaction's commit (wr); a transaction's appends and fetches come before its commit; a poll's
fetch comes before the sends its transaction makes after the poll returned. Nothing orders a send
before a later poll of its transaction: librdkafka prefetches, so that poll may return records
fetched before the send. A cycle among these events is an order no execution can have: forbidden.
Such a cycle always passes through a commit, whose only way on is a wr edge, so it is a G1c; a
G0 never makes one (ww follows offsets, and nothing else leads from an append to another
transaction's): every G0 is allowed. Forbidden G1c are counted once per strongly connected
component of the events; G0-allowed and G1c-allowed once per component of the transactions that
holds no forbidden cycle, with the reason in the example."""

import bisect
import collections
import sys

import checker
from checker import Report
from history import FAIL, INFO, OK, Op, read

FORBIDDEN = checker.FORBIDDEN + ("aborted-read", "torn-transaction", "G1c", "uncommitted-offset-read",
                                  "reprocessed-input")
ALLOWED = checker.ALLOWED + ("G0-allowed", "G1c-allowed")
REASONS = {
    "G0-allowed": "writes are not isolated: offsets are given at append, so concurrent transactions "
                  "interleave in different orders in different partitions",
    "G1c-allowed": "a poll inside a transaction is not isolated: it may read a transaction that committed "
                   "after records this transaction had appended ahead of it (its records may even have been "
                   "fetched before the sends that precede the poll)",
    "G1c": "no order of appends, commits and polls that Kafka's model permits explains this cycle",
}
COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"
# Micro-operations per transaction are few: a send's derived op id is txn id * MOPS_MAX + index.
MOPS_MAX = 64


class Send:
    __slots__ = ("index", "partition", "value", "offset")

    def __init__(self, index, partition, value, offset):
        self.index, self.partition, self.value, self.offset = index, partition, value, offset


class Txn:
    """One transaction: its op, its fate, its sends and the polls it read with (by mop index)."""

    def __init__(self, op):
        self.op = op
        self.id = op.id
        self.status = {OK: COMMITTED, FAIL: ABORTED}.get(op.outcome, UNKNOWN)
        mops = op.completion.get("mops") or op.invocation.get("mops", [])
        self.sends = [Send(index, mop[1], mop[2], mop[3] if len(mop) > 3 else None)
                      for index, mop in enumerate(mops) if mop[0] == "send"]
        self.reads = {}
        # A consume-transform-produce transaction: its group, the offsets it sent to the
        # transaction for that group ({partition: offset}) and its derived values' inputs.
        self.group = op.invocation.get("group")
        self.offsets = {int(p): int(o) for p, o in (op.completion.get("offsets") or {}).items()}
        self.derived = op.completion.get("derived") or []

    def __repr__(self):
        return f"T{self.id}"


def transactions(ops):
    """{txn id: Txn}, each with the ok polls it read with."""
    txns = {op.id: Txn(op) for op in ops if op.f == "txn"}
    for op in ops:
        if op.f == "poll" and op.outcome == OK and op.get("txn") in txns:
            txns[op.get("txn")].reads[op.get("mop")] = op
    return txns


def _send_op(txn, send):
    """A send of a transaction as the queue checker's `send` op, acknowledged at its offset."""
    op = Op({"id": txn.id * MOPS_MAX + send.index, "process": txn.op.process, "f": "send",
             "time": txn.op.invoke_time, "partition": send.partition, "value": send.value})
    op.outcome, op.complete_time, op.completion = OK, txn.op.complete_time, {"offset": send.offset}
    return op


class View:
    """What the history shows about the transactions: who wrote each value, which values were read,
    which transactions committed (or were seen to), and where their records are."""

    def __init__(self, ops):
        self.ops = ops
        self.others = [op for op in ops if op.f != "txn"]
        self.txns = transactions(ops)
        self.writer = {send.value: txn for txn in self.txns.values() for send in txn.sends}
        self.polls = {poll.id: poll for txn in self.txns.values() for poll in txn.reads.values()}
        self.records = list(checker._records(ops))
        observed = {self.writer[value].id for _, _, _, value in self.records if value in self.writer}
        self.visible = {txn.id: txn for txn in self.txns.values()
                        if txn.status == COMMITTED or (txn.status == UNKNOWN and txn.id in observed)}
        self.place = {}  # value -> (partition, offset), for the records of visible transactions
        for txn in self.visible.values():
            for send in txn.sends:
                if send.offset is not None:
                    self.place[send.value] = (send.partition, send.offset)
        for _, partition, offset, value in self.records:
            if value in self.writer and self.writer[value].id in self.visible:
                self.place.setdefault(value, (partition, offset))

    def send_ops(self, statuses):
        return [_send_op(txn, send) for txn in self.txns.values() if txn.status in statuses for send in txn.sends]

    def version_orders(self):
        """The offsets known to hold committed records: committed sends, and every record read but
        those of aborted transactions (an aborted read is a class of its own, not a reason to count
        the readers that rightly stepped over it)."""
        known = {(send.partition, send.offset) for txn in self.txns.values() if txn.status == COMMITTED
                 for send in txn.sends if send.offset is not None}
        known.update((partition, offset) for _, partition, offset, value in self.records
                     if value not in self.writer or self.writer[value].status != ABORTED)
        return checker.version_orders(known)

    def partition_lists(self):
        """{partition: [(offset, value), ...] in offset order} of the visible transactions' records."""
        lists = collections.defaultdict(list)
        for value, (partition, offset) in self.place.items():
            lists[partition].append((offset, value))
        return {partition: sorted(entries) for partition, entries in lists.items()}


def check_queue_classes(view, report):
    placed = [op for op in view.send_ops((COMMITTED, ABORTED, UNKNOWN)) if op.get("offset") is not None]
    checker.check_offsets(placed + view.others, report)
    checker.check_lost(view.send_ops((COMMITTED,)) + view.others, report)
    checker.check_sends(placed, report)
    checker.check_polls(view.others, report, view.version_orders())
    checker.check_committed(view.others + offset_commits(view), report)


def offset_commits(view):
    """The group offsets of the consume-transform-produce transactions that committed (or may
    have) as the queue checker's `commit` ops, so committed-offset-regression covers their groups:
    a committed transaction is an acknowledged commit of its offsets, an unknown one an
    indeterminate commit, an aborted one none."""
    commits = []
    for txn in view.txns.values():
        if not txn.group or not txn.offsets or txn.status == ABORTED:
            continue
        offsets = {str(p): o for p, o in txn.offsets.items()}
        op = Op({"id": txn.id * MOPS_MAX + MOPS_MAX - 1, "process": txn.op.process, "f": "commit",
                 "time": txn.op.invoke_time, "group": txn.group, "offsets": offsets})
        op.outcome = OK if txn.status == COMMITTED else INFO
        op.complete_time = txn.op.complete_time
        op.completion = {"group": txn.group, "offsets": offsets}
        commits.append(op)
    return commits


def check_group_offsets(view, report):
    """uncommitted-offset-read: a read of a consume-transform-produce group's committed offsets
    shows, for a partition, an offset that no transaction of that group which committed (or may
    have) sent to its transaction before the read ended: the offsets of aborted transactions only,
    or of none. A group's offsets move only with a commit."""
    sent = collections.defaultdict(list)  # (group, partition) -> [(offset, txn)]
    for txn in view.txns.values():
        for partition, offset in txn.offsets.items():
            sent[(txn.group, partition)].append((offset, txn))
    groups = {txn.group for txn in view.txns.values() if txn.group}
    for read_op in view.others:
        if read_op.f != "committed" or read_op.outcome != OK or read_op.get("group") not in groups:
            continue
        group = read_op.get("group")
        for partition, found in sorted(read_op.get("offsets", {}).items()):
            partition, found = int(partition), int(found)
            if found < 0:
                continue  # nothing committed yet
            writers = [txn for offset, txn in sent[(group, partition)]
                       if offset == found and txn.op.invoke_time < read_op.complete_time]
            if any(txn.status != ABORTED for txn in writers):
                continue
            report.add("uncommitted-offset-read", {
                "group": group, "partition": partition, "read": found, "op": read_op.id,
                "aborted_txns": [txn.id for txn in writers][:10]})


def check_reprocessed(view, report):
    """reprocessed-input: an input record whose derived values two transactions of one group
    committed (or were seen to): the consume-transform-produce loop processed it twice, although
    the first commit moved the group's offset past it. Counted once per input record and group."""
    processed = collections.defaultdict(list)  # (group, partition, offset) -> [(txn id, derived value)]
    for txn in view.visible.values():
        for value, partition, offset, _ in txn.derived:
            processed[(txn.group, partition, offset)].append((txn.id, value))
    for (group, partition, offset), by in sorted(processed.items()):
        if len({txn_id for txn_id, _ in by}) > 1:
            report.add("reprocessed-input", {"group": group, "partition": partition, "offset": offset,
                                             "txns_and_values": by[:10]})


def check_aborted_reads(view, report):
    counted = set()
    for process, partition, offset, value in view.records:
        txn = view.writer.get(value)
        if txn is not None and txn.status == ABORTED and value not in counted:
            counted.add(value)
            report.add("aborted-read", {"value": value, "txn": txn.id, "partition": partition, "offset": offset,
                                        "reader": process})


def reader_runs(ops):
    """(process, partition, first offset, last offset, values) of every run of records one session
    returned from a partition with no reset (assign, subscribe, rebalance, a failed poll) in
    between: the range the session read through."""
    open_runs = collections.defaultdict(dict)  # process -> {partition: [first, last, values]}
    for op in sorted(ops, key=checker._completed_at):
        if op.f in checker.POSITION_RESETS or (op.f == "poll" and op.outcome != OK):
            yield from _close(op.process, open_runs.pop(op.process, {}))
        elif op.f == "poll":
            runs = open_runs[op.process]
            for partition, offset, value in op.get("records", ()):
                run = runs.setdefault(partition, [offset, offset, set()])
                run[1] = max(run[1], offset)
                run[2].add(value)
    for process, runs in open_runs.items():
        yield from _close(process, runs)


def _close(process, runs):
    for partition, (first, last, values) in runs.items():
        yield process, partition, first, last, values


def check_torn(view, report):
    seen = collections.defaultdict(set)  # process -> ids of the visible transactions it read
    for process, _, _, value in view.records:
        if value in view.writer and view.writer[value].id in view.visible:
            seen[process].add(view.writer[value].id)
    torn = {}
    final = final_reader(view.ops)
    lists = view.partition_lists()
    for process, partition, first, last, values in reader_runs(view.ops):
        if process == final:
            continue
        entries = lists.get(partition, [])
        position = bisect.bisect_right(entries, (first, float("inf")))
        while position < len(entries) and entries[position][0] < last:
            offset, value = entries[position]
            position += 1
            txn = view.writer[value]
            if value not in values and txn.id in seen[process]:
                torn.setdefault((process, txn.id), {
                    "txn": txn.id, "reader": process, "partition": partition, "offset": offset,
                    "missing": value, "read_through": [first, last]})
    if final is not None:
        read_by_final = {value for process, _, _, value in view.records if process == final}
        for txn_id in sorted(seen[final]):
            missing = [send.value for send in view.visible[txn_id].sends if send.value not in read_by_final]
            if missing:
                torn[(final, txn_id)] = {"txn": txn_id, "reader": "final read", "missing": missing}
    for _, example in sorted(torn.items()):
        report.add("torn-transaction", example)


def final_reader(ops):
    """The process of the final read, when it completed (read every partition to its end)."""
    done = [op.process for op in ops if op.f == "final-read" and op.outcome == OK]
    return done[-1] if done else None


class Graph:
    """A directed graph with labelled edges: {node: [(successor, kind, detail), ...]}."""

    def __init__(self):
        self.edges = collections.defaultdict(list)
        self.nodes = {}

    def add(self, source, target, kind, detail=None):
        self.nodes.setdefault(source, None)
        self.nodes.setdefault(target, None)
        self.edges[source].append((target, kind, detail))

    def successors(self, node):
        return [target for target, _, _ in self.edges.get(node, ())]

    def components(self, nodes=None, kinds=None):
        """The nontrivial strongly connected components (Tarjan's algorithm, iterative), of the
        subgraph of `nodes` (default: all) and of the edges of `kinds` (default: all)."""
        nodes = self.nodes if nodes is None else nodes

        def successors(node):
            return [target for target, kind, _ in self.edges.get(node, ())
                    if target in nodes and (kinds is None or kind in kinds)]
        found = []
        for component in strongly_connected(list(nodes), successors):
            if len(component) > 1 or component[0] in successors(component[0]):
                found.append(set(component))
        return found

    def cycle_through(self, edge, nodes, kinds=None):
        """A cycle made of `edge` (source, target, kind, detail) and a shortest path back from its
        target to its source inside `nodes` (along edges of `kinds`, default all)."""
        source, target, _, _ = edge
        back = {target: None}
        queue = collections.deque([target])
        while queue and source not in back:
            node = queue.popleft()
            for successor, edge_kind, edge_detail in self.edges.get(node, ()):
                if successor in nodes and successor not in back and (kinds is None or edge_kind in kinds):
                    back[successor] = (node, edge_kind, edge_detail)
                    queue.append(successor)
        path = []
        node = source
        while node != target:
            previous, edge_kind, edge_detail = back[node]
            path.append((previous, node, edge_kind, edge_detail))
            node = previous
        return [edge] + path[::-1]

    def edges_within(self, nodes, kinds):
        for source in nodes:
            for target, kind, detail in self.edges.get(source, ()):
                if target in nodes and kind in kinds:
                    yield source, target, kind, detail


def strongly_connected(nodes, successors):
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(successors(root)))]
        while work:
            node, pending = work[-1]
            for successor in pending:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(successors(successor))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    found.append(component)
    return found


def dependencies(view):
    """The transaction graph (nodes: visible transaction ids; ww and wr edges between two of them)
    and the event graph (nodes: ("append", value), ("read", poll id), ("commit", txn id))."""
    txns, events = Graph(), Graph()
    for txn in view.visible.values():
        txns.nodes.setdefault(txn.id, None)
        commit = ("commit", txn.id)
        for send in txn.sends:
            events.add(("append", send.value), commit, "po")
        for index, poll in txn.reads.items():
            events.add(("read", poll.id), commit, "po")
            for send in txn.sends:
                if send.index > index:
                    events.add(("read", poll.id), ("append", send.value), "po")
            for partition, offset, value in poll.get("records", ()):
                writer = view.writer.get(value)
                if writer is not None and writer.id in view.visible:
                    detail = {"poll": poll.id, "value": value, "partition": partition, "offset": offset}
                    events.add(("commit", writer.id), ("read", poll.id), "wr", detail)
                    if writer.id != txn.id:
                        txns.add(writer.id, txn.id, "wr", detail)
    for partition, entries in view.partition_lists().items():
        for (offset, value), (next_offset, next_value) in zip(entries, entries[1:]):
            detail = {"partition": partition, "offsets": [offset, next_offset]}
            events.add(("append", value), ("append", next_value), "ww", detail)
            first, second = view.writer[value].id, view.writer[next_value].id
            if first != second:
                txns.add(first, second, "ww", detail)
    return txns, events


def _txn_of(node, view):
    kind, key = node
    if kind == "append":
        return view.writer[key].id
    if kind == "commit":
        return key
    return view.polls[key].get("txn")


def describe_event_cycle(cycle, view):
    steps = []
    for source, target, kind, detail in cycle:
        a, b = _txn_of(source, view), _txn_of(target, view)
        if kind == "po":
            steps.append(f"T{a}: {_event_name(source)} before {_event_name(target)}")
        elif kind == "ww":
            steps.append(f"T{a} ww-> T{b} (partition {detail['partition']}, offsets {detail['offsets']})")
        else:
            steps.append(f"T{a} wr-> T{b} (poll {detail['poll']} read {detail['value']} at "
                         f"{detail['partition']}/{detail['offset']})")
    return steps


def _event_name(node):
    kind, key = node
    return {"append": f"append of {key}", "read": f"poll {key}'s fetch", "commit": "its commit"}[kind]


def describe_txn_cycle(cycle):
    steps = []
    for source, target, kind, detail in cycle:
        if kind == "ww":
            steps.append(f"T{source} ww-> T{target} (partition {detail['partition']}, "
                         f"offsets {detail['offsets']})")
        else:
            steps.append(f"T{source} wr-> T{target} (poll {detail['poll']} read {detail['value']})")
    return steps


def check_cycles(view, report):
    txns, events = dependencies(view)
    forbidden_txns = set()
    for component in events.components():
        wr = next(events.edges_within(component, ("wr",)))  # every cycle of events holds one
        members = {_txn_of(node, view) for node in component}
        forbidden_txns |= members
        report.add("G1c", {"txns": sorted(members)[:20], "reason": REASONS["G1c"],
                           "cycle": describe_event_cycle(events.cycle_through(wr, component), view)})
    for component in txns.components():
        if component & forbidden_txns:
            continue
        wr = next(txns.edges_within(component, ("wr",)), None)
        if wr:
            report.add("G1c-allowed", {"txns": sorted(component)[:20], "reason": REASONS["G1c-allowed"],
                                       "cycle": describe_txn_cycle(txns.cycle_through(wr, component))})
        writes = txns.components(nodes=component, kinds=("ww",))
        if writes:
            edge = next(txns.edges_within(writes[0], ("ww",)))
            report.add("G0-allowed", {"txns": sorted(writes[0])[:20], "reason": REASONS["G0-allowed"],
                                      "cycle": describe_txn_cycle(txns.cycle_through(edge, writes[0], ("ww",)))})


def check(header, ops):
    report = Report(header, FORBIDDEN, ALLOWED)
    view = View(ops)
    check_queue_classes(view, report)
    check_aborted_reads(view, report)
    check_torn(view, report)
    check_cycles(view, report)
    check_group_offsets(view, report)
    check_reprocessed(view, report)
    statuses = collections.Counter(txn.status for txn in view.txns.values())
    report.figures.update({
        "ops": sum(1 for op in ops if op.f in ("txn", "poll", "commit", "committed")),
        "txns_committed": statuses[COMMITTED], "txns_aborted": statuses[ABORTED],
        "txns_unknown": statuses[UNKNOWN],
        "txn_reads": sum(len(txn.reads) for txn in view.txns.values()),
        "ctp_txns_committed": sum(1 for txn in view.txns.values() if txn.group and txn.status == COMMITTED),
        "ctp_inputs_committed": sum(len(txn.derived) for txn in view.txns.values() if txn.status == COMMITTED),
        "sends_ok": sum(len(txn.sends) for txn in view.txns.values() if txn.status == COMMITTED),
        "records_read": len(view.records),
        **checker.fault_figures(ops),
    })
    return report


def check_file(path):
    return check(*read(path))


TABLE_HEADER = checker.table_header(FORBIDDEN + ALLOWED)


def main(argv=None):
    return checker.command(check_file, "Count the anomalies of a transactional history.", argv)


if __name__ == "__main__":
    sys.exit(main())
