"""A cluster of real processes (SPEC §13) as plain code, no pytest: one etcd (Debian's
``etcd-server``), and :class:`Nodes`, the tests' :class:`~tests.cluster.support.Cluster` with
the ``ack``, ``lease_ttl`` and ``[server]`` lines chosen. The cluster's tests use them through
their fixtures, and the failover soak (``tools/soak/failover_soak.py``) and ``make
bench-replication`` run the same processes the same way, so a cluster is started, asked and
checked one way everywhere.
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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import grpc

from sowdb import testing
from sowdb_api.v1 import admin_pb2, admin_pb2_grpc
from tests.cluster.support import TOPICS, TTL, Cluster, digest, journal

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


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


def config_text(etcd: EtcdServer, ack: str = "sync", ttl: int = TTL, server: str = "") -> str:
    """The nodes' shared config: the tests' topics, ``[cluster]``, and ``server`` as the lines of
    a ``[server]`` section."""
    section = f"[server]\n{server}\n" if server else ""
    return f"""{section}{TOPICS}
[cluster]
name = "t"
etcd = ["{etcd.url}"]
ack = "{ack}"
sync_replicas = 1
lease_ttl = "{ttl}s"
"""


def cluster_status(target: str, timeout: float = 5) -> list[admin_pb2.ClusterNode]:
    """``ClusterStatus`` of the node at ``target``: itself first, then (a primary) its followers."""
    with grpc.insecure_channel(target) as channel:
        reply = admin_pb2_grpc.AdminServiceStub(channel).ClusterStatus(
            admin_pb2.ClusterStatusRequest(), timeout=timeout
        )
    return list(reply.nodes)


class Nodes(Cluster):
    """A :class:`Cluster` whose nodes share the config :func:`config_text` writes, and that each
    start with more flags if given (``--http-listen``, ``--log-level``)."""

    def __init__(self, directory: Path, etcd: EtcdServer, ack: str = "sync", ttl: int = TTL, server: str = "") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        super().__init__(directory, etcd)
        self.ttl = ttl
        self.config.write_text(config_text(etcd, ack, ttl, server))

    def start(self, name: str, *flags: str) -> testing.Sowd:
        sowd = testing.start(
            self.tmp_path / name, "--node", name, "--advertise", "127.0.0.1:0", *flags, config=self.config, env=self.env
        )
        self.nodes[name] = sowd
        self.started.append((name, sowd))
        return sowd


@contextmanager
def nodes(directory: Path, etcd: EtcdServer, ack: str = "sync", ttl: int = TTL, server: str = "") -> Iterator[Nodes]:
    """:class:`Nodes` (none started yet), every one stopped on leaving."""
    c = Nodes(directory, etcd, ack, ttl, server)
    try:
        yield c
    finally:
        c.stop()


def fingerprint(data_dir: Path) -> tuple[int, str]:
    """(last bookmark, SHA-256 of the journal, ``current`` and producer state) of a stopped
    node: two nodes that hold the same entries and the same state have the same pair."""
    last, current, producers = digest(data_dir)
    return last, hashlib.sha256(repr((journal(data_dir), current, sorted(producers.items()))).encode()).hexdigest()
