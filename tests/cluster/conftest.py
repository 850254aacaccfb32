"""A real etcd for the cluster's tests (Debian's ``etcd-server``, installed by ``make setup``):
one member on 127.0.0.1 with free client and peer ports and its data in a temp dir, started
healthy and stopped (SIGCONT first, should a test have paused it)."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.support import Cluster

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


@dataclass
class EtcdServer:
    """A running etcd: its client URL, and its process to pause or stop."""

    process: subprocess.Popen[bytes]
    port: int

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


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [int(s.getsockname()[1]) for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    if not Path(ETCD).exists():
        pytest.fail("etcd is not installed: run `make setup` (it installs Debian's etcd-server)")
    client, peer = _free_ports(2)
    log = (tmp_path / "etcd.log").open("wb")
    process = subprocess.Popen(
        [
            ETCD,
            "--name=t",
            f"--data-dir={tmp_path / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{client}",
            f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=t=http://127.0.0.1:{peer}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = EtcdServer(process, client)
    try:
        give_up = time.monotonic() + 30
        while not server.healthy():
            if process.poll() is not None or time.monotonic() > give_up:
                pytest.fail(f"etcd did not start: {(tmp_path / 'etcd.log').read_text()[-2000:]}")
            time.sleep(0.05)
        yield server
    finally:
        server.resume()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture
def cluster(tmp_path: Path, etcd: EtcdServer) -> Iterator[Cluster]:
    c = Cluster(tmp_path, etcd)
    try:
        yield c
    finally:
        c.stop()
