"""The network lab of the partition faults: every address a partitioned run uses lives in network
namespaces this lab makes, never in the machine's own namespace. The run itself (its clients, and
the Skiff target's etcd) runs inside the hub namespace, which holds a bridge; each node (a Skiff
broker or a Kafka node) runs in its own namespace with one veth into that bridge. The layout is the
cluster tests' (tests/clients/test_replication_faults.py: a bridge, a namespace per broker, a cut
is a blackhole route), with names and a subnet of its own so both can run side by side.

A cut drops everything one node sends to one address (both ways when both sides get one); the
hub's addresses (the clients' and etcd's) are never cut from the hub side, so a partition is
between nodes, or between a node and etcd. The lab owns only its namespaces and links; it starts
no process and never writes the history."""

import os
import subprocess

HUB = "jqhub"
BRIDGE = "jqbr"
SUBNET = "10.79.0"
CLIENT_IP = f"{SUBNET}.1"  # the bridge's own address in the hub: the run's connections come from it
ETCD_IP = f"{SUBNET}.2"  # a second bridge address, for the Skiff target's etcd alone
# Set in the environment of the run re-started inside the hub.
INSIDE_ENV = "JEPSEN_INSIDE_LAB"
IP_TIMEOUT_S = 30


class LabError(RuntimeError):
    """An `ip` command of the lab failed."""


def node_ip(index):
    return f"{SUBNET}.1{index}"


def ip(*args, check=True):
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if check and result.returncode != 0:
        raise LabError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def inside():
    """Whether this process runs inside the hub of a lab set up by its parent."""
    return os.environ.get(INSIDE_ENV) == HUB


class Lab:
    """The hub namespace with its bridge and `size` node namespaces jqn0.. on 10.79.0.10.. Names
    are fixed, so a run that died before its cleanup is cleaned up by the next one."""

    def __init__(self, size=3):
        self.size = size
        self.cuts = set()

    @staticmethod
    def namespace(index):
        return f"jqn{index}"

    def setup(self):
        if os.geteuid() != 0:
            raise LabError("network namespaces need root")
        self.cleanup()
        ip("netns", "add", HUB)
        ip("-n", HUB, "link", "set", "lo", "up")
        ip("-n", HUB, "link", "add", BRIDGE, "type", "bridge")
        ip("-n", HUB, "addr", "add", f"{CLIENT_IP}/24", "dev", BRIDGE)
        ip("-n", HUB, "addr", "add", f"{ETCD_IP}/24", "dev", BRIDGE)
        ip("-n", HUB, "link", "set", BRIDGE, "up")
        for index in range(self.size):
            ns, veth, peer = self.namespace(index), f"jqv{index}", f"jqp{index}"
            ip("netns", "add", ns)
            ip("-n", HUB, "link", "add", veth, "type", "veth", "peer", "name", peer, "netns", ns)
            ip("-n", HUB, "link", "set", veth, "master", BRIDGE, "up")
            ip("-n", ns, "addr", "add", f"{node_ip(index)}/24", "dev", peer)
            ip("-n", ns, "link", "set", peer, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        return self

    def prefix(self, index):
        """The command prefix that starts a process in node `index`'s namespace."""
        return ["ip", "netns", "exec", self.namespace(index)]

    def hub_command(self, command):
        """`command` run inside the hub, marked so that it knows."""
        return ["ip", "netns", "exec", HUB, "env", f"{INSIDE_ENV}={HUB}", *command]

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
        ip("netns", "del", HUB, check=False)
