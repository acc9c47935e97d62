"""The network lab of the partition faults: every address a partitioned run uses lives in network
namespaces this lab makes, never in the machine's own namespace. The run itself (its clients, and
the Skiff target's etcd) runs inside the hub namespace, which holds a bridge; each node (a Skiff
broker or a Kafka node) runs in its own namespace with one veth into that bridge. The layout is the
cluster tests' (tests/clients/test_replication_faults.py: a bridge, a namespace per broker, a cut
is a blackhole route), with names and a subnet of its own so both can run side by side.

Labs are numbered (`--lab N` of run.py, 0 to 9): each has its own names and subnet, so runs on
one machine can go side by side.

A cut drops everything one node sends to one address (both ways when both sides get one); the
hub's addresses (the clients' and etcd's) are never cut from the hub side, so a partition is
between nodes, or between a node and etcd. The lab owns only its namespaces and links; it starts
no process and never writes the history."""

import os
import subprocess

# Set, to the lab's number, in the environment of the run re-started inside the hub.
INSIDE_ENV = "JEPSEN_INSIDE_LAB"
IP_TIMEOUT_S = 30
LABS = 10


class LabError(RuntimeError):
    """An `ip` command of the lab failed."""


def ip(*args, check=True):
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if check and result.returncode != 0:
        raise LabError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def inside():
    """The number of the lab whose hub this process runs in (set up by its parent), or None."""
    number = os.environ.get(INSIDE_ENV)
    return int(number) if number is not None else None


class Lab:
    """Lab N: the hub namespace jqNhub with its bridge and `size` node namespaces jqNn0.. on
    10.79.N.10.. (the run on .1, etcd on .2). Names are fixed per number, so a run that died before
    its cleanup is cleaned up by the next one of that number."""

    def __init__(self, number=0, size=3):
        if not 0 <= number < LABS:
            raise LabError(f"lab number {number}: 0 to {LABS - 1}")
        self.number, self.size = number, size
        self.hub, self.bridge = f"jq{number}hub", f"jq{number}br"
        self.subnet = f"10.79.{number}"
        self.client_ip = f"{self.subnet}.1"  # the bridge's own address: the run's connections come from it
        self.etcd_ip = f"{self.subnet}.2"  # a second bridge address, for the Skiff target's etcd alone
        self.cuts = set()

    def namespace(self, index):
        return f"jq{self.number}n{index}"

    def node_ip(self, index):
        return f"{self.subnet}.1{index}"

    def setup(self):
        if os.geteuid() != 0:
            raise LabError("network namespaces need root")
        self.cleanup()
        hub, bridge = self.hub, self.bridge
        ip("netns", "add", hub)
        ip("-n", hub, "link", "set", "lo", "up")
        ip("-n", hub, "link", "add", bridge, "type", "bridge")
        ip("-n", hub, "addr", "add", f"{self.client_ip}/24", "dev", bridge)
        ip("-n", hub, "addr", "add", f"{self.etcd_ip}/24", "dev", bridge)
        ip("-n", hub, "link", "set", bridge, "up")
        for index in range(self.size):
            # veth names live in the hub and the node's own namespace: no clash between labs.
            ns, veth, peer = self.namespace(index), f"jqv{index}", f"jqp{index}"
            ip("netns", "add", ns)
            ip("-n", hub, "link", "add", veth, "type", "veth", "peer", "name", peer, "netns", ns)
            ip("-n", hub, "link", "set", veth, "master", bridge, "up")
            ip("-n", ns, "addr", "add", f"{self.node_ip(index)}/24", "dev", peer)
            ip("-n", ns, "link", "set", peer, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        return self

    def prefix(self, index):
        """The command prefix that starts a process in node `index`'s namespace."""
        return ["ip", "netns", "exec", self.namespace(index)]

    def hub_command(self, command):
        """`command` run inside the hub, marked so that it knows."""
        return ["ip", "netns", "exec", self.hub, "env", f"{INSIDE_ENV}={self.number}", *command]

    def cut(self, index, address):
        """Drops everything node `index` sends to `address`."""
        if (index, address) in self.cuts:
            return
        ip("-n", self.namespace(index), "route", "add", "blackhole", f"{address}/32")
        self.cuts.add((index, address))

    def heal(self):
        for index, address in sorted(self.cuts):
            ip("-n", self.namespace(index), "route", "del", "blackhole", f"{address}/32", check=False)
        self.cuts.clear()

    def cleanup(self):
        for index in range(self.size):
            ip("netns", "del", self.namespace(index), check=False)
        ip("netns", "del", self.hub, check=False)
