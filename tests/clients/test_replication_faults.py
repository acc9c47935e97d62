"""Failure scenarios of docs/design/cluster.md §6 on 3 brokers and a real etcd:

- E9, double failovers: (KIP-101) the leader A holds records above the high watermark, A and
  both followers die, a follower B comes back and leads a new epoch that takes new acks=all
  writes at the offsets A's tail had, then A comes back and must truncate to B's epoch boundary;
  (KIP-279) a follower's tail is at an epoch the new leader never saw, and it must truncate to
  its own end of the epoch the leader answers with;
- E8, a controller paused (SIGSTOP) past its session while the cluster needs controller writes
  (an election after a leader is killed, a topic deletion): a successor takes over with a new
  controller epoch, etcd's history shows no write of the old controller accepted once the
  successor exists (I6), and the paused broker comes back as a plain broker;
- E3/E4, network partitions: each broker in its own network namespace on a bridge (10.77.0.0/24,
  etcd on the bridge). E3 cuts a leader off from its followers (not from etcd): the ISR shrinks to
  the leader after replica.lag.time.max.ms and acks=all gets NOT_ENOUGH_REPLICAS. E4 cuts a
  leader off from etcd (not from its followers): a new leader is elected and the old one
  acknowledges no acks=all record after that.

After each: every acknowledged acks=all record is read back at its offset through every broker
(I1) and all replicas hold identical batches and leader-epoch caches (I3). `SKIFF_SEED` sets the
seed (printed with the figures)."""

import base64
import json
import os
import random
import re
import signal
import socket
import subprocess
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import SUMMARY_LINES
from test_cluster import ANSI, SESSION_MS, SkiffCluster, controller_seen_by, dump_logs, metrics, wait_for
from test_cluster_topics import produce_v3_error, produce_v3_frame
from test_replication import (LAG_MS, NOT_ENOUGH_REPLICAS, REPLICA_SETTINGS, TOPIC, Producers,
                              batches_on_disk, bootstraps, create_rf3, describe, leader_of, list_latest,
                              read_all, ready)

SEED = int(os.environ.get("SKIFF_SEED", str(random.randrange(1 << 32))))
FAILOVER_S = SESSION_MS / 1000 + 10


def start_cluster(etcd, hosts=None, prefixes=None, settings=REPLICA_SETTINGS):
    cluster = SkiffCluster(etcd, 3)
    cluster.brokers = [cluster._broker(i, cluster.dirs[i], settings,
                                       host=(hosts or {}).get(i, "127.0.0.1"),
                                       command_prefix=(prefixes or {}).get(i, ()))
                       for i in range(3)]
    cluster.start()
    return ready(cluster)


@pytest.fixture
def cluster3(etcd):
    cluster = start_cluster(etcd)
    yield cluster
    dump_logs(cluster)
    cluster.stop()


def produce(bootstrap, values, acks, partition=0):
    """Sends `values` to `partition` and waits for every answer: {offset: value} of the
    acknowledged ones (all of them, or the assertion says which failed)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                         "message.timeout.ms": 30000, "retry.backoff.ms": 50})
    acked, errors = {}, []

    def delivered(error, message):
        if error is None:
            acked[message.offset()] = message.value()
        else:
            errors.append(str(error))

    for value in values:
        producer.produce(TOPIC, value=value, partition=partition, on_delivery=delivered)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    return acked


def epoch_cache(data_dir, partition=0):
    """The (epoch, start offset) entries of a replica's leader-epoch checkpoint."""
    path = os.path.join(data_dir, f"{TOPIC}-{partition}", "leader-epoch-checkpoint")
    with open(path) as checkpoint:
        lines = checkpoint.read().split("\n")
    count = int(lines[1])
    return [tuple(int(field) for field in line.split()) for line in lines[2:2 + count]]


def wait_replicas_agree(dirs, partition=0, timeout_s=20):
    """I3 once replication settled: identical batches (offsets, CRCs, epochs) up to equal log
    ends, and the same leader-epoch cache entries below that end. (A leader adds its epoch on
    becoming leader, before it writes at it, as Kafka's `makeLeader` does; followers learn epochs
    from batches. An entry at the log end is therefore the leader's alone.)"""
    def state():
        replicas = []
        for data_dir in dirs:
            batches = batches_on_disk(data_dir, partition)
            end = batches[-1][0] + batches[-1][1] + 1 if batches else 0
            replicas.append((batches, [e for e in epoch_cache(data_dir, partition) if e[1] < end]))
        return replicas

    deadline = time.monotonic() + timeout_s
    while True:
        replicas = state()
        if all(replica == replicas[0] for replica in replicas):
            return replicas[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"replicas of partition {partition} differ after {timeout_s} s: {replicas}")
        time.sleep(0.1)


def check_no_loss(cluster, acked, partition=0, absent=()):
    """I1: every acknowledged record at its offset through every broker; none of `absent`."""
    end = list_latest(cluster.brokers[0].bootstrap, partition)
    assert not acked or max(acked) < end, (max(acked), end)
    for broker in cluster.brokers:
        seen = read_all(broker.bootstrap, end, legacy=False, partition=partition)
        missing = [offset for offset, value in acked.items() if seen.get(offset) != value]
        assert not missing, (broker.port, partition, missing[:10])
        assert not set(absent) & set(seen.values()), (broker.port, "an unacknowledged record survived")
    return end


# --- E9 ----------------------------------------------------------------------------------------

def test_e9_a_leader_with_records_above_the_hw_truncates_to_the_next_leaders_epoch(cluster3):
    cluster = cluster3
    rng = random.Random(SEED)
    create_rf3(cluster)
    a = leader_of(cluster)
    b, c = rng.sample([i for i in range(3) if i != a], 2)
    first, tail_count, later = rng.randint(5, 30), rng.randint(3, 20), rng.randint(10, 40)
    print(f"SKIFF_SEED={SEED}: A={a} B={b} C={c}, {first} acked, {tail_count} above the HW, {later} later")
    acked = produce(bootstraps(cluster), [b"first-%d" % i for i in range(first)], "all")
    wait_replicas_agree(cluster.dirs)
    ports = [broker.port for broker in cluster.brokers]
    # Both followers stop fetching: acks=1 writes land on A alone, above the high watermark. A
    # dies before its leader-side shrink (replica.lag.time.max.ms) and before the followers'
    # sessions end, so the ISR stays {A, B, C} and B may lead next.
    for index in (b, c):
        cluster.brokers[index].process.send_signal(signal.SIGSTOP)
    paused_at = time.monotonic()
    try:
        tail_values = [b"tail-%d" % i for i in range(tail_count)]
        tail = produce(cluster.brokers[a].bootstrap, tail_values, "1")
        assert time.monotonic() - paused_at < SESSION_MS / 1000 * 0.8, "too slow to keep the ISR whole"
    finally:
        for index in (a, b, c):
            cluster.brokers[index].stop(signal.SIGKILL)
    assert min(tail) == first and len(tail) == tail_count, tail
    on_a, on_b = batches_on_disk(cluster.dirs[a]), batches_on_disk(cluster.dirs[b])
    assert len(on_a) > len(on_b) and on_a[:len(on_b)] == on_b, (on_a, on_b)
    assert batches_on_disk(cluster.dirs[c]) == on_b
    old_epoch = on_a[-1][3]

    cluster.brokers[b].start(port=ports[b])
    wait_for(lambda: describe(cluster.brokers[b].bootstrap)[0][0] == b, FAILOVER_S, "B leading")
    cluster.brokers[c].start(port=ports[c])
    wait_for(lambda: describe(cluster.brokers[b].bootstrap)[0][2] == sorted([b, c]), LAG_MS / 1000 + 20,
             "C in B's ISR")
    new = produce(bootstraps(cluster), [b"later-%d" % i for i in range(later)], "all")
    assert min(new) == first, "B's epoch starts where its log ended, below A's tail"
    acked.update(new)

    cluster.brokers[a].start(port=ports[a])
    wait_for(lambda: describe(cluster.brokers[b].bootstrap)[0][2] == [0, 1, 2], LAG_MS / 1000 + 20,
             "A back in the ISR")
    wait_replicas_agree(cluster.dirs)
    check_no_loss(cluster, acked, absent=tail_values)
    on_a = batches_on_disk(cluster.dirs[a])
    new_epochs = {epoch for base, _, _, epoch in on_a if base >= first}
    assert min(new_epochs) > old_epoch, (old_epoch, new_epochs)
    cache = epoch_cache(cluster.dirs[a])
    assert any(epoch > old_epoch and start == first for epoch, start in cache), cache
    SUMMARY_LINES.append(f"E9 (seed {SEED}): A={a} had {tail_count} records above the HW at epoch {old_epoch}; "
                         f"B={b} led from offset {first} at epoch {min(new_epochs)}; A truncated and all 3 agree "
                         f"({len(acked)} acks=all records kept)")
    print(SUMMARY_LINES[-1])


LONG_SESSION_MS = 10000


def test_e9_kip279_a_follower_truncates_below_an_epoch_the_new_leader_never_saw(etcd):
    """KIP-279's case: the new leader C never saw the epoch of the follower B's tail, so it
    answers with the largest epoch it knows below (A's), ending past B's own end of that
    epoch; B must truncate to its own end for that epoch, not the leader's.

    A leads epoch e with replicas [A, B, C]. B pauses, A writes a tail T_A (acks=1) that C
    copies. C pauses, A stops cleanly (its controlled shutdown hands the lead to B), B resumes and leads epoch e+1 and
    writes a tail T_B (acks=1) at the offsets of T_A. B is killed, C resumes and leads epoch e+2
    (it never saw e+1). B returns: it must drop T_B and take T_A. Sessions are 10 s here, so the
    paused C stays registered and in the ISR through B's term."""
    cluster = start_cluster(etcd, settings=REPLICA_SETTINGS + (f"broker.session.timeout.ms={LONG_SESSION_MS}",))
    try:
        rng = random.Random(SEED)
        create_rf3(cluster, partitions=6)
        controller = controller_seen_by(cluster.brokers[0])[0]
        metadata = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap}).list_topics(TOPIC, timeout=10)
        # Assignment order decides elections: B must come before C, and neither B nor C (each
        # paused while the other's election is needed) may be the controller: A's controlled
        # shutdown waits for the controller to move its leadership.
        usable = sorted((p.id, list(p.replicas)) for p in metadata.topics[TOPIC].partitions.values()
                        if p.leader == p.replicas[0] and controller not in p.replicas[1:])
        assert usable, metadata.topics[TOPIC].partitions
        partition, (a, b, c) = rng.choice(usable)
        A, B, C = (cluster.brokers[i] for i in (a, b, c))
        first, tail_a, tail_b, later = (rng.randint(5, 20), rng.randint(3, 10), rng.randint(3, 10),
                                        rng.randint(10, 30))
        print(f"SKIFF_SEED={SEED}: partition {partition} A={a} B={b} C={c} controller {controller}; "
              f"{first} acked, T_A {tail_a}, T_B {tail_b}, {later} later")
        acked = produce(bootstraps(cluster), [b"first-%d" % i for i in range(first)], "all", partition)
        wait_replicas_agree(cluster.dirs, partition)
        ports = [broker.port for broker in cluster.brokers]
        tb_values = [b"tail-b-%d" % i for i in range(tail_b)]
        B.process.send_signal(signal.SIGSTOP)
        try:
            # B's fetch parked on A at the pause is answered into its socket when data comes or
            # after replica.fetch.wait.max.ms (200 ms); B would read T_A from there on waking.
            # Nothing observable says it was answered empty: wait that long, with a margin.
            time.sleep(0.6)
            produce(A.bootstrap, [b"tail-a-%d" % i for i in range(tail_a)], "1", partition)
            wait_for(lambda: batches_on_disk(cluster.dirs[c], partition) == batches_on_disk(cluster.dirs[a], partition),
                     5, "C holding T_A")
            C.process.send_signal(signal.SIGSTOP)
            A.stop()
        finally:
            B.process.send_signal(signal.SIGCONT)
        try:
            wait_for(lambda: describe(B.bootstrap)[partition][0] == b, 10, "B leading")
            assert produce(B.bootstrap, tb_values, "1", partition)
            B.stop(signal.SIGKILL)
        finally:
            C.process.send_signal(signal.SIGCONT)
        on_a, on_b, on_c = (batches_on_disk(cluster.dirs[i], partition) for i in (a, b, c))
        epoch_a, epoch_b = on_a[-1][3], on_b[-1][3]
        assert epoch_b > epoch_a and on_c == on_a, (on_a, on_b, on_c)
        # T_B starts where the acknowledged records end, at the first offset of T_A.
        assert min(base for base, _, _, epoch in on_b if epoch == epoch_b) == first and \
            on_a[-1][0] + on_a[-1][1] >= first, (first, on_a, on_b)
        wait_for(lambda: describe(C.bootstrap)[partition][0] == c, LONG_SESSION_MS / 1000 + 10, "C leading")
        assert epoch_b not in {epoch for epoch, _ in epoch_cache(cluster.dirs[c], partition)}
        B.start(port=ports[b])
        A.start(port=ports[a])
        wait_for(lambda: describe(C.bootstrap)[partition][2] == [0, 1, 2], LAG_MS / 1000 + 20, "a full ISR again")
        acked.update(produce(bootstraps(cluster), [b"later-%d" % i for i in range(later)], "all", partition))
        wait_replicas_agree(cluster.dirs, partition)
        check_no_loss(cluster, acked, partition=partition, absent=tb_values)
        SUMMARY_LINES.append(f"E9/KIP-279 (seed {SEED}): B={b} wrote {tail_b} records at epoch {epoch_b} over A's "
                             f"epoch-{epoch_a} tail that only C={c} held; C led without knowing epoch {epoch_b}; "
                             f"B truncated to its own end of epoch {epoch_a} and all 3 agree")
        print(SUMMARY_LINES[-1])
    finally:
        dump_logs(cluster)
        for broker in cluster.brokers:
            if broker.alive():
                broker.process.send_signal(signal.SIGCONT)
        cluster.stop()


# --- E8 ----------------------------------------------------------------------------------------

CONTROLLER_WRITE = re.compile(r"controller write(?P<refused> refused)?\b.*?\bepoch=(?P<epoch>\d+) revision=(?P<rev>\d+)")


def etcdctl(etcd, *args):
    result = subprocess.run(["etcdctl", f"--endpoints={','.join(etcd.endpoints)}", *args], capture_output=True,
                            text=True, timeout=30, env=dict(os.environ, ETCDCTL_API="3"))
    assert result.returncode == 0, result.stderr
    return result.stdout


def etcd_history(etcd, cluster_name, timeout_s=30):
    """Every event under `/skiff/<cluster_name>/` since the cluster's first key, in revision
    order: (revision, type, key, value dict or None, create_revision). Read with `etcdctl watch
    --rev` up to a sentinel key this function writes (outside the cluster's root `.../v1/`)."""
    prefix = f"/skiff/{cluster_name}/"
    sentinel = f"{prefix}history-sentinel"
    # From the cluster's first key: older revisions may be compacted in a long session.
    first = json.loads(etcdctl(etcd, "get", f"{prefix}v1/cluster", "-w", "json"))["kvs"][0]["create_revision"]
    etcdctl(etcd, "put", sentinel, str(time.time()))
    watcher = subprocess.Popen(["etcdctl", f"--endpoints={','.join(etcd.endpoints)}", "watch", "--prefix", prefix,
                                f"--rev={first}", "-w", "json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, env=dict(os.environ, ETCDCTL_API="3"))
    events = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            line = watcher.stdout.readline()
            assert line, "etcdctl watch ended"
            response = json.loads(line)
            assert not response.get("Canceled"), response  # e.g. compacted
            for event in response.get("Events") or []:
                kv = event["kv"]
                key = base64.b64decode(kv["key"]).decode()
                if key == sentinel:
                    return events
                kind = "DELETE" if event.get("type") == 1 else "PUT"
                value = json.loads(base64.b64decode(kv["value"])) if kind == "PUT" else None
                events.append((kv["mod_revision"], kind, key[len(prefix):], value, kv.get("create_revision", 0)))
        raise AssertionError("etcd history not read within the deadline")
    finally:
        watcher.kill()
        watcher.wait()


def controller_terms(history):
    """[(epoch, broker id, revision it ended or None)] from the history of `v1/controller`."""
    terms = []
    for revision, kind, key, value, created in history:
        if key != "v1/controller":
            continue
        if kind == "PUT" and created == revision:
            terms.append([created, value["broker_id"], None])
        elif kind == "DELETE":
            terms[-1][2] = revision
    return [tuple(term) for term in terms]


def controller_writes(broker):
    """(epoch, revision, refused) of every controller Txn the broker logged."""
    found = []
    for line in broker.log_lines:
        match = CONTROLLER_WRITE.search(ANSI.sub("", line))
        if match:
            found.append((int(match["epoch"]), int(match["rev"]), bool(match["refused"])))
    return found


def test_e8_a_paused_controller_is_fenced_and_returns_as_a_plain_broker(cluster3, etcd):
    cluster = cluster3
    rng = random.Random(SEED)
    create_rf3(cluster, partitions=6)
    controller = controller_seen_by(cluster.brokers[0])[0]
    layout = describe(cluster.brokers[0].bootstrap)
    candidates = sorted(p for p, (leader, _, _) in layout.items() if leader not in (controller, -1))
    assert candidates, ("the controller leads every partition", layout)
    partition = rng.choice(candidates)
    victim = layout[partition][0]
    survivor = next(i for i in range(3) if i not in (controller, victim))
    print(f"SKIFF_SEED={SEED}: controller {controller}, partition {partition} led by {victim}, survivor {survivor}")
    admin = AdminClient({"bootstrap.servers": cluster.brokers[survivor].bootstrap})
    admin.create_topics([NewTopic("doomed", 1, 1)])["doomed"].result(30)
    paused = cluster.brokers[controller]
    producers = Producers(cluster, partition=partition)
    try:
        wait_for(lambda: producers.count() > 30, 30, "first acknowledgements")
        victim_port = cluster.brokers[victim].port
        paused.process.send_signal(signal.SIGSTOP)
        paused_at = time.monotonic()
        try:
            # The partition's leader dies while the controller is stopped: only a controller can
            # elect its successor. A deletion also needs the controller.
            cluster.brokers[victim].stop(signal.SIGKILL)
            successor = wait_for(lambda: (lambda c: c if c not in (controller, -1) else None)(
                controller_seen_by(cluster.brokers[survivor])[0]), FAILOVER_S, "a successor controller")
            # A new client: librdkafka sends DeleteTopics to the controller its metadata names.
            admin = AdminClient({"bootstrap.servers": cluster.brokers[survivor].bootstrap})
            admin.delete_topics(["doomed"])["doomed"].result(30)
            wait_for(lambda: describe(cluster.brokers[survivor].bootstrap)[partition][0] == survivor, FAILOVER_S,
                     "the partition re-elected")
            wait_for(lambda: "doomed" not in admin.list_topics(timeout=10).topics, 20, "the topic deleted")
            cluster.brokers[victim].start(port=victim_port)
            paused_for = time.monotonic() - paused_at
        finally:
            paused.process.send_signal(signal.SIGCONT)
        resumed_at = time.monotonic()
        # Back as a plain broker: a new session, not the controller, in every ISR again.
        wait_for(lambda: metrics(paused)["skiff_cluster_sessions_lost_total"] >= 1, 10, "the pause noticed")
        wait_for(lambda: all(metrics(b)["skiff_cluster_brokers"] == 3 for b in cluster.brokers), 15,
                 "3 brokers registered")
        wait_for(lambda: {controller_seen_by(b)[0] for b in cluster.brokers} == {successor}, 10,
                 "every broker sees the successor")
        assert metrics(paused)["skiff_cluster_controller"] == 0
        assert metrics(paused)["skiff_cluster_session_alive"] == 1
        wait_for(lambda: all(isr == [0, 1, 2] for _, _, isr in describe(paused.bootstrap).values()),
                 LAG_MS / 1000 + 20, "every ISR whole again")
        wait_for(lambda: producers.both_acknowledged_since(resumed_at), 20,
                 "acknowledgements of both producers after the pause")
    finally:
        producers.stop()

    history = etcd_history(etcd, cluster.name)
    terms = controller_terms(history)
    old = [term for term in terms if term[1] == controller][0]
    new = next(term for term in terms if term[0] > old[0])
    assert new[1] == successor and old[2] is not None and old[2] < new[0], terms
    logged = {broker_id: controller_writes(broker) for broker_id, broker in enumerate(cluster.brokers)}
    accepted = {revision: (broker_id, epoch) for broker_id, writes in logged.items()
                for epoch, revision, refused in writes if not refused}

    def term_at(revision):
        return next((t for t in terms if t[0] <= revision and (t[2] is None or revision < t[2])), None)

    # I6 from etcd's history: every partition state the controller wrote was written by a Txn
    # whose fence named the controller key live at that revision.
    controller_states = sorted({r for r, kind, key, value, _ in history
                                if kind == "PUT" and key.startswith("v1/partitions/") and value["writer"] == "controller"})
    assert controller_states, "no controller write at all"
    for revision in controller_states:
        assert revision in accepted, (revision, "a controller write no broker logged", logged)
    for revision, (broker_id, epoch) in accepted.items():
        term = term_at(revision)
        assert term is not None and term[0] == epoch and term[1] == broker_id, (revision, broker_id, epoch, terms)
    stale_accepted = [r for e, r, refused in logged[controller] if e == old[0] and not refused and r >= new[0]]
    refused_after = [r for e, r, refused in logged[controller] if e == old[0] and refused and r >= new[0]]
    assert not stale_accepted, stale_accepted
    by_successor = [r for r, (broker_id, epoch) in accepted.items() if epoch == new[0]]
    assert by_successor, "the successor wrote nothing"
    assert any(line for line in paused.log_lines if "stepped down as controller" in line), paused.log_lines[-30:]

    acked = {**producers.idempotent, **producers.legacy}
    assert not [e for e in producers.errors if e[0] == "idempotent"], producers.errors[:5]
    check_no_loss(cluster, acked, partition=partition)
    for p in layout:
        wait_replicas_agree(cluster.dirs, p)
    SUMMARY_LINES.append(
        f"E8 (seed {SEED}): controller {controller} (epoch {old[0]}) paused {paused_for:.1f} s; successor {successor} "
        f"epoch {new[0]}; {len(accepted)} controller writes accepted ({len(by_successor)} by the successor), "
        f"0 of the old epoch after revision {new[0]}; the old controller's writes refused after it: "
        f"{len(refused_after)}; {len(acked)} acks=all records kept")
    print(SUMMARY_LINES[-1])


# --- E3 / E4: network partitions between namespaces --------------------------------------------

SUBNET = "10.77.0"
CLIENT_IP = f"{SUBNET}.1"  # the bridge's primary address: the test's own connections come from it
ETCD_IP = f"{SUBNET}.2"  # a second address on the bridge, for etcd alone
BRIDGE = "skfbr"


def broker_ip(index):
    return f"{SUBNET}.1{index}"


def ip(*args, check=True):
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


class NetnsLab:
    """Three namespaces skfb0..2, each with a veth into the bridge skfbr in the root namespace
    (brokers on 10.77.0.10-12, the test on .1, etcd on .2). A partition is a blackhole route in a
    namespace: packets to the chosen address are dropped silently, both ways when both sides get
    one. Names are fixed, so a run that died before its cleanup is cleaned up by the next."""

    def __init__(self, size=3):
        self.size = size
        self.cuts = set()

    def namespace(self, index):
        return f"skfb{index}"

    def setup(self):
        self.cleanup()
        ip("link", "add", BRIDGE, "type", "bridge")
        ip("addr", "add", f"{CLIENT_IP}/24", "dev", BRIDGE)
        ip("addr", "add", f"{ETCD_IP}/24", "dev", BRIDGE)
        ip("link", "set", BRIDGE, "up")
        for index in range(self.size):
            ns, veth, peer = self.namespace(index), f"skfv{index}", f"skfp{index}"
            ip("netns", "add", ns)
            ip("link", "add", veth, "type", "veth", "peer", "name", peer)
            ip("link", "set", peer, "netns", ns)
            ip("link", "set", veth, "master", BRIDGE, "up")
            ip("-n", ns, "addr", "add", f"{broker_ip(index)}/24", "dev", peer)
            ip("-n", ns, "link", "set", peer, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        return self

    def prefix(self, index):
        return ["ip", "netns", "exec", self.namespace(index)]

    def cut(self, index, address):
        """Drops everything broker `index` sends to `address`."""
        ip("-n", self.namespace(index), "route", "add", "blackhole", f"{address}/32")
        self.cuts.add((index, address))

    def heal(self):
        for index, address in sorted(self.cuts):
            ip("-n", self.namespace(index), "route", "del", "blackhole", f"{address}/32")
        self.cuts.clear()

    def cleanup(self):
        for index in range(self.size):
            ip("netns", "del", self.namespace(index), check=False)
            ip("link", "del", f"skfv{index}", check=False)
        ip("link", "del", BRIDGE, check=False)


@pytest.fixture
def netns_cluster():
    """3 brokers, each in its own namespace, on a 1-member etcd on the bridge. The namespaces,
    links, brokers and etcd go away even when the test fails."""
    from etcd_cluster import EtcdCluster

    if os.geteuid() != 0:
        pytest.fail("network namespaces need root")
    lab = NetnsLab()
    etcd = cluster = None
    try:
        lab.setup()
        etcd = EtcdCluster(size=1, host=ETCD_IP).start()
        cluster = start_cluster(etcd, hosts={i: broker_ip(i) for i in range(3)},
                                prefixes={i: lab.prefix(i) for i in range(3)})
        yield lab, cluster
    finally:
        if cluster is not None:
            for broker in cluster.brokers:
                if broker.alive():
                    broker.process.send_signal(signal.SIGCONT)
            cluster.stop()
        if etcd is not None:
            etcd.stop()
        lab.cleanup()
        leftovers = ip("netns", "list").stdout
        assert "skfb" not in leftovers, leftovers


def raw_produce(broker, acks, values, timeout_s=15):
    """The first answer of each raw Produce v3 of one record (no client-side retries)."""
    codes = []
    with socket.create_connection((broker.host, broker.port), timeout=timeout_s) as connection:
        for correlation_id, value in enumerate(values):
            connection.sendall(produce_v3_frame(TOPIC, 0, correlation_id, acks=acks, value=value))
            codes.append(produce_v3_error(connection, correlation_id))
    return codes


def test_e3_a_leader_cut_off_from_its_followers_shrinks_its_isr_and_refuses_acks_all(netns_cluster):
    lab, cluster = netns_cluster
    create_rf3(cluster)
    leader = leader_of(cluster)
    followers = [i for i in range(3) if i != leader]
    print(f"E3: leader {leader}, followers {followers}")
    acked = produce(bootstraps(cluster), [b"before-%d" % i for i in range(20)], "all")
    bootstrap = cluster.brokers[leader].bootstrap
    # Idempotent and legacy acks=all producers write through the cut; they retry what is refused.
    producers = Producers(cluster)
    try:
        wait_for(lambda: producers.count() > 30, 30, "first acknowledgements")
        for follower in followers:
            lab.cut(leader, broker_ip(follower))
            lab.cut(follower, broker_ip(leader))
        cut_at = time.monotonic()
        try:
            wait_for(lambda: describe(bootstrap)[0][2] == [leader], LAG_MS / 1000 * 1.5 + 10,
                     "the ISR shrunk to the leader")
            shrunk_at = time.monotonic()
            shrunk_after = shrunk_at - cut_at
            # Still registered and still leading: the cut is between brokers, etcd sees all three.
            assert metrics(cluster.brokers[leader])["skiff_cluster_brokers"] == 3
            assert describe(bootstrap)[0][0] == leader
            codes = raw_produce(cluster.brokers[leader], -1, [b"refused-%d" % i for i in range(3)])
            assert codes == [NOT_ENOUGH_REPLICAS] * 3, codes
            healed_at = time.monotonic()
        finally:
            lab.heal()
        wait_for(lambda: describe(bootstrap)[0][2] == [0, 1, 2], LAG_MS / 1000 + 20, "the followers back in the ISR")
        wait_for(lambda: producers.success_times[-1] > healed_at, 20, "acknowledgements after healing")
    finally:
        producers.stop()
    acked.update(produce(bootstraps(cluster), [b"after-%d" % i for i in range(20)], "all"))
    # With an ISR of one below min.insync.replicas 2 nothing is acknowledged (0.5 s for the
    # answers already under way when the shrink was seen).
    with producers.lock:
        during = [t for t in producers.success_times if shrunk_at + 0.5 < t < healed_at]
    assert not during, f"{len(during)} acks=all acknowledged with an ISR of one"
    assert not [e for e in producers.errors if e[0] == "idempotent"], producers.errors[:5]
    SUMMARY_LINES.append(f"E3: leader {leader} cut off from its followers: ISR {{{leader}}} after {shrunk_after:.1f} s "
                         f"(replica.lag.time.max.ms {LAG_MS}); acks=all answered {codes}, none acknowledged with an "
                         f"ISR of one; {len(acked) + producers.count()} acks=all kept")
    print(SUMMARY_LINES[-1])
    assert shrunk_after >= LAG_MS / 1000 - 0.5, shrunk_after
    check_no_loss(cluster, {**acked, **producers.idempotent, **producers.legacy},
                  absent=[b"refused-%d" % i for i in range(3)])
    wait_replicas_agree(cluster.dirs)


def test_e4_a_leader_cut_off_from_etcd_is_replaced_and_acknowledges_nothing_after(netns_cluster):
    lab, cluster = netns_cluster
    create_rf3(cluster)
    leader = leader_of(cluster)
    follower = (leader + 1) % 3
    old = cluster.brokers[leader]
    print(f"E4: leader {leader}")
    producers = Producers(cluster)
    zombie_values = [b"zombie-%d" % i for i in range(3)]
    try:
        wait_for(lambda: producers.count() > 30, 30, "first acknowledgements")
        lab.cut(leader, ETCD_IP)
        cut_at = time.monotonic()
        try:
            # acks=1 right after the cut, while the old leader still believes it leads: these may
            # be kept or truncated, but every replica must end up with the same log.
            early_codes = raw_produce(old, 1, [b"early-%d" % i for i in range(3)])
            new_leader = wait_for(lambda: (lambda l: l if l not in (leader, -1) else None)(
                describe(cluster.brokers[follower].bootstrap)[0][0]), SESSION_MS / 1000 + 5, "a new leader")
            failover_s = time.monotonic() - cut_at
            # The new epoch exists: the old leader must not acknowledge acks=all any more (it
            # answers at once rather than parking the request).
            codes = raw_produce(old, -1, zombie_values)
            assert 0 not in codes, codes
            before_heal = batches_on_disk(cluster.dirs[leader])
        finally:
            lab.heal()
        wait_for(lambda: metrics(old)["skiff_cluster_sessions_lost_total"] >= 1, 15, "the old leader's lost session")
        wait_for(lambda: describe(cluster.brokers[new_leader].bootstrap)[0][2] == [0, 1, 2], LAG_MS / 1000 + 20,
                 "the old leader back in the ISR")
        healed_at = time.monotonic()
        wait_for(lambda: producers.success_times[-1] > healed_at, 20, "acknowledgements after healing")
    finally:
        producers.stop()
    acked = {**producers.idempotent, **producers.legacy}
    assert not [e for e in producers.errors if e[0] == "idempotent"], producers.errors[:5]
    check_no_loss(cluster, acked, absent=zombie_values)
    wait_replicas_agree(cluster.dirs)
    after = batches_on_disk(cluster.dirs[leader])
    dropped = [batch for batch in before_heal if batch not in after]
    SUMMARY_LINES.append(f"E4: leader {leader} cut off from etcd: leader {new_leader} after {failover_s:.1f} s; the old "
                         f"leader answered acks=1 right after the cut with {early_codes} and acks=all after the new epoch with {codes}; {len(dropped)} of its batches truncated on healing; "
                         f"{len(acked)} acks=all kept")
    print(SUMMARY_LINES[-1])
