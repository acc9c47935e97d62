"""A 3-member etcd cluster on loopback for the cluster tests (docs/design/cluster.md §8): Debian's etcd-server,
free ports, its own temporary directory, stopped by pid. (The network-partition tests start a
1-member one on a bridge address instead.) One cluster serves a whole pytest session;
each test uses its own `skiff.cluster.name`, so tests never see each other's keys."""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

from conftest import free_port

HEALTHY_TIMEOUT_S = 30


class EtcdCluster:
    def __init__(self, size=3, host="127.0.0.1"):
        self.dir = tempfile.mkdtemp(prefix="skiff-etcd-")
        # The address every member listens on (the network-partition tests put etcd on a bridge).
        self.host = host
        self.members = [
            {"name": f"e{n}", "client": free_port(), "peer": free_port(), "metrics": free_port(), "process": None}
            for n in range(1, size + 1)
        ]

    @property
    def endpoints(self):
        return [f"{self.host}:{m['client']}" for m in self.members]

    @property
    def address(self):
        return "etcd://" + ",".join(self.endpoints)

    def _initial_cluster(self):
        return ",".join(f"{m['name']}=http://{self.host}:{m['peer']}" for m in self.members)

    def start_member(self, index):
        member = self.members[index]
        client = f"http://{self.host}:{member['client']}"
        peer = f"http://{self.host}:{member['peer']}"
        log = open(os.path.join(self.dir, f"{member['name']}.log"), "a")
        member["process"] = subprocess.Popen(
            [
                "etcd", "--name", member["name"],
                "--data-dir", os.path.join(self.dir, f"{member['name']}.etcd"),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", self._initial_cluster(),
                "--initial-cluster-token", "skiff-cluster-test", "--initial-cluster-state", "new",
                "--listen-metrics-urls", f"http://{self.host}:{member['metrics']}",
                "--auto-compaction-mode=periodic", "--auto-compaction-retention=1h",
            ],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
        )

    def start(self):
        for index in range(len(self.members)):
            self.start_member(index)
        for index in range(len(self.members)):
            self.wait_healthy(index)
        return self

    def wait_healthy(self, index):
        url = f"http://{self.host}:{self.members[index]['client']}/health"
        deadline = time.monotonic() + HEALTHY_TIMEOUT_S
        last = None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if b'"health":"true"' in response.read():
                        return
            except OSError as error:
                last = error
            time.sleep(0.2)
        raise RuntimeError(f"etcd member {index} not healthy: {last}")

    def kill(self, index):
        process = self.members[index]["process"]
        if process is not None:
            process.send_signal(signal.SIGKILL)
            process.wait()
            self.members[index]["process"] = None

    def stop(self):
        for member in self.members:
            if member["process"] is not None:
                member["process"].terminate()
        for member in self.members:
            if member["process"] is not None:
                try:
                    member["process"].wait(10)
                except subprocess.TimeoutExpired:
                    member["process"].kill()
                member["process"] = None
        shutil.rmtree(self.dir, ignore_errors=True)
