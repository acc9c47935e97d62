"""Faults scheduled by the run's seed. The scheduler owns the timing and the choice (one
`random.Random(seed)`): it waits, picks a fault kind, lets the kind start it on a target it chooses,
holds it, heals it, and writes both ends into the history. A fault kind owns only how to start and
heal itself through the target's interface (targets.py); it never sleeps for the scheduler and
never writes the history.

To add a kind (a network partition in namespaces, an etcd member kill, a coordinator failover):
write a class with `name`, `start(target, rng) -> description` and `heal(target)`, give it a
`hold_s(target, rng)`, and list it in KINDS. Only one fault is active at a time, and `stop()` heals
the active one, so every run's final read meets a whole cluster."""

import random
import threading

FAULT_PROCESS = "nemesis"


class LeaderKill:
    """SIGKILL the leader of a partition the seed picks, restart it (same port, same data) later."""

    name = "kill"

    def __init__(self, topic, partitions):
        self.topic, self.partitions, self.victim = topic, partitions, None

    def hold_s(self, target, rng):
        return rng.uniform(2, 6)

    def start(self, target, rng):
        partition = rng.randrange(self.partitions)
        leader = target.leader_of(self.topic, partition)
        self.victim = leader if leader >= 0 else rng.randrange(target.size)
        target.kill(self.victim)
        return {"broker": self.victim, "partition": partition}

    def heal(self, target):
        target.restart(self.victim)


class Pause:
    """SIGSTOP the leader of a partition the seed picks past its broker session, then SIGCONT."""

    name = "pause"

    def __init__(self, topic, partitions):
        self.topic, self.partitions, self.victim = topic, partitions, None

    def hold_s(self, target, rng):
        return target.session_s + rng.uniform(1, 4)

    def start(self, target, rng):
        partition = rng.randrange(self.partitions)
        leader = target.leader_of(self.topic, partition)
        self.victim = leader if leader >= 0 else rng.randrange(target.size)
        target.pause(self.victim)
        return {"broker": self.victim, "partition": partition}

    def heal(self, target):
        target.resume(self.victim)


KINDS = {"kill": LeaderKill, "pause": Pause}


class FaultScheduler(threading.Thread):
    """Every `interval_s` (jittered by the seed) one fault of `kinds`, held, then healed; the
    cluster is given `settle_s` between a heal and the next fault."""

    def __init__(self, target, history, seed, kinds, topic, partitions, interval_s=10.0, settle_s=4.0):
        super().__init__(daemon=True, name="faults")
        self.target, self.history = target, history
        self.rng = random.Random(f"faults-{seed}")
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
