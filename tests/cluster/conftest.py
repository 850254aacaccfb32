"""A real etcd for the cluster's tests (Debian's ``etcd-server``, installed by ``make setup``):
one member on 127.0.0.1 with free client and peer ports and its data in a temp dir, started
healthy and stopped (SIGCONT first, should a test have paused it); and a cluster of nodes on it.
etcd is secured as docs/cluster.md sets it up (TLS, client certificates, authentication, a role
limited to the cluster's keys), so every cluster test runs that way (issue 40).
The launcher itself is :func:`sowdb.testing.etcd.start_etcd`, plain code that the failover
soak and the replication benchmark share."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from sowdb.testing.cluster import CREATED, Cluster
from sowdb.testing.etcd import EtcdServer, start_etcd

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


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report on the test item, so that a fixture can tell a failed test."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(autouse=True)
def nodes_output_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """When a test fails, print the output of every node of every :class:`Cluster` it made
    (pytest shows it with the failure): a step-down or a fork on a loaded machine says itself."""
    CREATED.clear()
    yield
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        for c in CREATED:
            print(f"the nodes' output ({c.tmp_path}):\n{c.outputs()}")
    CREATED.clear()


@pytest.fixture
def cluster(tmp_path: Path, etcd: EtcdServer) -> Iterator[Cluster]:
    c = Cluster(tmp_path, etcd)
    try:
        yield c
    finally:
        c.stop()
