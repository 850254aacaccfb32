"""A cluster of real processes (SPEC §13): one etcd (Debian's ``etcd-server``) and ``sowd`` nodes
started by the one launcher (:mod:`sowdb.testing`), each with its own data directory and port,
advertising the address it bound.

Plain code, no pytest: the cluster's tests use it through their fixtures, and the failover soak
(``tools/soak/failover_soak.py``) and ``make bench-replication`` run the same processes the same
way, so a cluster is started, asked and checked one way everywhere.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import grpc

from sowdb import testing
from sowdb.storage import Store
from sowdb_api.v1 import admin_pb2, admin_pb2_grpc

ETCD = shutil.which("etcd") or "/usr/bin/etcd"

TTL = 2
"""``lease_ttl`` of the tests' clusters, in seconds: etcd's shortest lease, so that they stay quick."""

TOPICS = """
[[topic]]
name = "orders"
key = ["/id"]
"""


@dataclass
class EtcdServer:
    """A running etcd: its client URL, and its process to pause or stop."""

    process: subprocess.Popen[bytes]
    port: int
    log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pause(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=1) as reply:
                return bool(json.load(reply).get("health") == "true")
        except OSError:
            return False

    def stop(self) -> None:
        """SIGCONT first (should it be paused), then SIGTERM, then SIGKILL after 10 s."""
        self.resume()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.log is not None:
            self.log.close()


def free_ports(n: int) -> list[int]:
    """``n`` ports that were free a moment ago (bound to port 0, then closed)."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [int(s.getsockname()[1]) for s in sockets]
    for s in sockets:
        s.close()
    return ports


def start_etcd(directory: Path, within: float = 30.0) -> EtcdServer:
    """One etcd member on 127.0.0.1 (free client and peer ports, data and log in ``directory``),
    once healthy.

    Raises:
        RuntimeError: etcd is not installed, ended, or was not healthy within ``within`` s.
    """
    if not Path(ETCD).exists():
        raise RuntimeError("etcd is not installed: run `make setup` (it installs Debian's etcd-server)")
    directory.mkdir(parents=True, exist_ok=True)
    client, peer = free_ports(2)
    log = (directory / "etcd.log").open("wb")
    process = subprocess.Popen(
        [
            ETCD,
            "--name=t",
            f"--data-dir={directory / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{client}",
            f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=t=http://127.0.0.1:{peer}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = EtcdServer(process, client, log)
    give_up = time.monotonic() + within
    while not server.healthy():
        if process.poll() is not None or time.monotonic() > give_up:
            server.stop()
            raise RuntimeError(f"etcd did not start: {(directory / 'etcd.log').read_text()[-2000:]}")
        time.sleep(0.05)
    return server


def node_config(directory: Path, etcd: EtcdServer, ack: str = "sync", ttl: int = TTL, server: str = "") -> Path:
    """The nodes' config file in ``directory`` (and ``alone.toml``: the same topics without
    ``[cluster]``); ``server``: lines of a ``[server]`` section."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "alone.toml").write_text(TOPICS)
    path = directory / "node.toml"
    section = f"[server]\n{server}\n" if server else ""
    path.write_text(
        section
        + TOPICS
        + f"""
[cluster]
name = "t"
etcd = ["{etcd.url}"]
ack = "{ack}"
sync_replicas = 1
lease_ttl = "{ttl}s"
"""
    )
    return path


def until(probe: Callable[[], object], within: float = 20.0) -> object:
    """``probe()``'s first true answer, asked every 50 ms; AssertionError after ``within`` s."""
    give_up = time.monotonic() + within
    while not (found := probe()):
        if time.monotonic() > give_up:
            raise AssertionError(f"not reached within {within}s")
        time.sleep(0.05)
    return found


def cluster_status(target: str, timeout: float = 5) -> list[admin_pb2.ClusterNode]:
    """``ClusterStatus`` of the node at ``target``: itself first, then (a primary) its followers."""
    with grpc.insecure_channel(target) as channel:
        reply = admin_pb2_grpc.AdminServiceStub(channel).ClusterStatus(
            admin_pb2.ClusterStatusRequest(), timeout=timeout
        )
    return list(reply.nodes)


class Cluster:
    """Nodes n1, n2, ... on one etcd, each in ``directory/NAME``."""

    def __init__(self, directory: Path, etcd: EtcdServer, ack: str = "sync", ttl: int = TTL, server: str = "") -> None:
        self.tmp_path = directory
        self.ttl = ttl
        self.config = node_config(directory, etcd, ack, ttl, server)
        self.nodes: dict[str, testing.Sowd] = {}

    def start(self, name: str, *flags: str) -> testing.Sowd:
        sowd = testing.start(
            self.tmp_path / name, "--node", name, "--advertise", "127.0.0.1:0", *flags, config=self.config
        )
        self.nodes[name] = sowd
        return sowd

    def status(self, name: str) -> list[admin_pb2.ClusterNode]:
        return cluster_status(self.nodes[name].target)

    def primary(self, among: list[str] | None = None, within: float = 20.0) -> str:
        """The node that says it is the primary (waiting until one does)."""
        names = among or list(self.nodes)
        return str(until(lambda: next((n for n in names if self.own(n).role == "primary"), None), within))

    def own(self, name: str) -> admin_pb2.ClusterNode:
        try:
            return self.status(name)[0]
        except grpc.RpcError:
            return admin_pb2.ClusterNode(node=name, role="down")

    def stop(self) -> None:
        for sowd in self.nodes.values():
            sowd.stop()


def digest(data_dir: Path) -> tuple[int, str]:
    """(last bookmark, SHA-256 of the journal and of ``current``) of a stopped node's store: two
    nodes that hold the same entries and the same state have the same pair."""
    store = Store(data_dir)
    try:
        h = hashlib.sha256()
        for key, value in store.iter_journal_raw(0):
            h.update(len(key).to_bytes(4, "big") + key + len(value).to_bytes(4, "big") + value)
        h.update(b"current")
        for topic, sow_key, record in store.load_current():
            h.update(repr((topic, sow_key, record)).encode())
        return store.last_sequence(), h.hexdigest()
    finally:
        store.close()
