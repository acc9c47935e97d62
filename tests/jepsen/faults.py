"""Faults scheduled by the run's seed. The scheduler owns the timing and the choice (one
`random.Random(seed)`): it waits, picks a fault kind, lets the kind start it on a target it chooses,
holds it, heals it, and writes both ends into the history. A fault kind owns only how to start and
heal itself through the target's interface (targets.py); it never sleeps for the scheduler and
never writes the history.

A kind is a class with `name`, `needs` (what the target must have: "lab" for a network lab,
"etcd"), `hold_s(target, rng)`, `start(target, rng) -> description` and `heal(target)`, listed in
KINDS. Only one fault is active at a time, and `stop()` heals the active one, so every run's final
read meets a whole cluster. A victim is chosen through the target (the leader of a partition the
seed picks, the controller, the subscribe group's coordinator, a transactional id's coordinator):
the seed fixes the kinds, the timing and the partition (or id), the cluster which broker that is."""

import random
import threading

from txn_workload import TRANSACTIONAL_ID_PREFIX, TXN_CLIENTS
from workload import SUBSCRIBE_GROUP

FAULT_PROCESS = "nemesis"


class NotApplicable(ValueError):
    """A fault kind the target cannot take (no network lab, no etcd)."""


def leader_victim(target, rng, topic, partitions):
    """(the leader of a partition the seed picks, or a broker the seed picks when none is known;
    that partition)."""
    partition = rng.randrange(partitions)
    leader = target.leader_of(topic, partition)
    return (leader if leader >= 0 else rng.randrange(target.size)), partition


def past_session_s(target, rng):
    """A hold that outlasts the broker session: the cluster must act on the fault."""
    return target.session_s + rng.uniform(1, 4)


class LeaderKill:
    """SIGKILL the leader of a partition the seed picks, restart it (same port, same data) later."""

    name = "kill"
    needs = ()

    def __init__(self, topic, partitions):
        self.topic, self.partitions, self.victim = topic, partitions, None

    def hold_s(self, target, rng):
        return rng.uniform(2, 6)

    def start(self, target, rng):
        self.victim, partition = leader_victim(target, rng, self.topic, self.partitions)
        target.kill(self.victim)
        return {"broker": self.victim, "partition": partition}

    def heal(self, target):
        target.restart(self.victim)


class Pause:
    """SIGSTOP the leader of a partition the seed picks past its broker session, then SIGCONT."""

    name = "pause"
    needs = ()

    def __init__(self, topic, partitions):
        self.topic, self.partitions, self.victim = topic, partitions, None

    def hold_s(self, target, rng):
        return past_session_s(target, rng)

    def start(self, target, rng):
        self.victim, partition = leader_victim(target, rng, self.topic, self.partitions)
        target.pause(self.victim)
        return {"broker": self.victim, "partition": partition}

    def heal(self, target):
        target.resume(self.victim)


class LeaderFromFollowers:
    """A network partition: the leader of a partition the seed picks cut off from its followers
    (both ways), not from etcd nor from the clients; the ISR must shrink and acks=all stop, or
    (Kafka, whose quorum is the nodes) the cut-off node loses its metadata quorum."""

    name = "partition-leader"
    needs = ("lab",)

    def __init__(self, topic, partitions):
        self.topic, self.partitions = topic, partitions

    def hold_s(self, target, rng):
        return past_session_s(target, rng) + rng.uniform(0, 4)

    def start(self, target, rng):
        leader, partition = leader_victim(target, rng, self.topic, self.partitions)
        followers = [index for index in range(target.size) if index != leader]
        for follower in followers:
            target.cut(leader, follower)
            target.cut(follower, leader)
        return {"broker": leader, "partition": partition, "from": followers}

    def heal(self, target):
        target.heal_cuts()


class BrokerFromEtcd:
    """A network partition: the leader of a partition the seed picks cut off from etcd (not from
    the other brokers nor the clients) past its session; a new leader is elected and the old one
    must acknowledge nothing after that. Skiff only: Kafka has no etcd."""

    name = "partition-etcd"
    needs = ("lab", "etcd")

    def __init__(self, topic, partitions):
        self.topic, self.partitions = topic, partitions

    def hold_s(self, target, rng):
        return past_session_s(target, rng)

    def start(self, target, rng):
        leader, partition = leader_victim(target, rng, self.topic, self.partitions)
        target.cut_from_etcd(leader)
        return {"broker": leader, "partition": partition}

    def heal(self, target):
        target.heal_cuts()


class MajorityFromMinority:
    """A network partition: the leader of a partition the seed picks (the minority) cut off from
    the other two brokers and from etcd, both ways, while the clients still reach it; the majority
    (two brokers and etcd) must go on without it. On Kafka the metadata quorum is the nodes, so
    this is the minority node cut off from both others."""

    name = "partition-majority"
    needs = ("lab",)

    def __init__(self, topic, partitions):
        self.topic, self.partitions = topic, partitions

    def hold_s(self, target, rng):
        return past_session_s(target, rng) + rng.uniform(0, 4)

    def start(self, target, rng):
        minority, partition = leader_victim(target, rng, self.topic, self.partitions)
        majority = [index for index in range(target.size) if index != minority]
        for other in majority:
            target.cut(minority, other)
            target.cut(other, minority)
        if target.has_etcd:
            target.cut_from_etcd(minority)
        return {"broker": minority, "partition": partition, "majority": majority}

    def heal(self, target):
        target.heal_cuts()


class EtcdMemberKill:
    """SIGKILL one of etcd's 3 members (the seed picks it), restart it later: etcd keeps its quorum,
    the brokers must fail over to the other endpoints. Skiff only."""

    name = "etcd-kill"
    needs = ("etcd",)
    MEMBERS = 3

    def __init__(self, topic, partitions):
        self.member = None

    def hold_s(self, target, rng):
        return rng.uniform(2, 8)

    def start(self, target, rng):
        self.member = rng.randrange(self.MEMBERS)
        target.kill_etcd(self.member)
        return {"etcd_member": self.member}

    def heal(self, target):
        target.restart_etcd(self.member)


class ControllerPause:
    """SIGSTOP the broker that is controller past its session, so a successor takes over with a
    new controller epoch while it sleeps; SIGCONT brings back a stale controller (Skiff: the broker
    Metadata names; Kafka: the KRaft quorum's leader)."""

    name = "controller-pause"
    needs = ()

    def __init__(self, topic, partitions):
        self.victim = None

    def hold_s(self, target, rng):
        return past_session_s(target, rng)

    def start(self, target, rng):
        controller = target.controller()
        self.victim = controller if controller >= 0 else rng.randrange(target.size)
        target.pause(self.victim)
        return {"broker": self.victim, "controller_known": controller >= 0}

    def heal(self, target):
        target.resume(self.victim)


class CoordinatorFailover:
    """Kill (then restart) or pause past its session (then resume), as the seed picks, the broker
    that coordinates the subscribe group: its members must find the new coordinator, and committed
    offsets must not go backwards."""

    name = "coordinator"
    needs = ()

    def __init__(self, topic, partitions):
        self.victim, self.how = None, None

    def hold_s(self, target, rng):
        # The way is picked here because the hold depends on it (the scheduler asks for the hold
        # before it starts the fault).
        self.how = rng.choice(("kill", "pause"))
        return rng.uniform(2, 6) if self.how == "kill" else past_session_s(target, rng)

    def start(self, target, rng):
        aimed_at = self.aim(rng)
        try:
            coordinator, unknown = self.find(target), None
        except Exception as error:  # noqa: BLE001 - unknown: the seed picks a broker, the history says why
            coordinator, unknown = -1, str(error)
        self.victim = coordinator if coordinator >= 0 else rng.randrange(target.size)
        (target.kill if self.how == "kill" else target.pause)(self.victim)
        return {"broker": self.victim, "how": self.how, **aimed_at, "coordinator_known": coordinator >= 0,
                **({"unknown_because": unknown} if unknown else {})}

    def aim(self, rng):
        """What the coordinator to hit coordinates (the history's description)."""
        self.group = SUBSCRIBE_GROUP
        return {"group": self.group}

    def find(self, target):
        return target.coordinator_of(self.group)

    def heal(self, target):
        (target.restart if self.how == "kill" else target.resume)(self.victim)


class TxnCoordinatorFailover(CoordinatorFailover):
    """The same, aimed at the broker that coordinates one of the transactional workload's
    transactional ids (the seed picks which; FindCoordinator with the TRANSACTION key type): its
    producers must find the new coordinator, which must finish or abort what the old one left open
    (a commit or abort under way, offsets sent to a transaction) and fence the old epoch."""

    name = "txn-coordinator"

    def aim(self, rng):
        self.transactional_id = f"{TRANSACTIONAL_ID_PREFIX}{rng.randrange(TXN_CLIENTS)}"
        return {"transactional_id": self.transactional_id}

    def find(self, target):
        return target.txn_coordinator_of(self.transactional_id)


KINDS = {kind.name: kind for kind in (LeaderKill, Pause, LeaderFromFollowers, BrokerFromEtcd,
                                      MajorityFromMinority, EtcdMemberKill, ControllerPause,
                                      CoordinatorFailover, TxnCoordinatorFailover)}
NEEDS_LAB = sorted(name for name, kind in KINDS.items() if "lab" in kind.needs)


def check_applicable(kinds, target):
    """Raises NotApplicable for a kind the target cannot take."""
    has = {"lab": target.lab is not None, "etcd": target.has_etcd}
    for name in kinds:
        missing = [need for need in KINDS[name].needs if not has[need]]
        if missing:
            raise NotApplicable(f"fault {name} needs {' and '.join(missing)}, which {type(target).__name__} has not")


class FaultScheduler(threading.Thread):
    """Every `interval_s` (jittered by the seed) one fault of `kinds`, held, then healed; the
    cluster is given `settle_s` between a heal and the next fault."""

    def __init__(self, target, history, seed, kinds, topic, partitions, interval_s=10.0, settle_s=4.0):
        super().__init__(daemon=True, name="faults")
        self.target, self.history = target, history
        self.rng = random.Random(f"faults-{seed}")
        check_applicable(kinds, target)
        self.kinds = [KINDS[name](topic, partitions) for name in kinds]
        self.interval_s, self.settle_s = interval_s, settle_s
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.active = None
        self.injected = []

    def run(self):
        while not self._stopping.wait(self.rng.uniform(self.interval_s / 2, self.interval_s)):
            kind = self.rng.choice(self.kinds)
            hold = kind.hold_s(self.target, self.rng)
            with self._lock:
                if self._stopping.is_set():
                    return
                self._start(kind)
            if self._stopping.wait(hold):
                return
            with self._lock:
                self._heal()
            self._stopping.wait(self.settle_s)

    def _start(self, kind):
        op = self.history.invoke(FAULT_PROCESS, "fault", name=kind.name, phase="start")
        try:
            description = kind.start(self.target, self.rng)
        except Exception as error:  # noqa: BLE001 - a failed injection is recorded, not fatal
            self.history.complete(op, FAULT_PROCESS, "fault", "fail", error=str(error))
            return
        self.history.complete(op, FAULT_PROCESS, "fault", "ok", **description)
        self.active = kind
        self.injected.append((kind.name, description))

    def _heal(self):
        if self.active is None:
            return
        kind, self.active = self.active, None
        op = self.history.invoke(FAULT_PROCESS, "fault", name=kind.name, phase="heal")
        kind.heal(self.target)
        self.history.complete(op, FAULT_PROCESS, "fault", "ok")

    def stop(self):
        """Stops scheduling and heals the active fault (before the final read)."""
        self._stopping.set()
        with self._lock:
            self._heal()
        self.join(30)
