"""A real etcd for the cluster's tests (Debian's ``etcd-server``, installed by ``make setup``):
one member on 127.0.0.1 with free client and peer ports and its data in a temp dir, started
healthy and stopped (SIGCONT first, should a test have paused it); and a cluster of nodes on it.
The launcher itself is :func:`tests.cluster.processes.start_etcd`, plain code that the failover
soak and the replication benchmark share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.processes import EtcdServer, start_etcd
from tests.cluster.support import Cluster

__all__ = ["EtcdServer", "cluster", "etcd"]


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    try:
        server = start_etcd(tmp_path)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def cluster(tmp_path: Path, etcd: EtcdServer) -> Iterator[Cluster]:
    c = Cluster(tmp_path, etcd)
    try:
        yield c
    finally:
        c.stop()
