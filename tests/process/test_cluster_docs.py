"""Docs truth for clusters: docs/cluster.md's "Running a cluster" and README.md's section of the
same name run as written: etcd and three ``sowd`` started, ``sow cluster``, a publish to the
primary and a write refused by a replica, README's two commands, a kill -9 of the primary and its
successor, the old primary back as a replica with every write, and the stop; its "Securing
etcd": etcd with TLS, client certificates and a role limited to the cluster's keys, a node on
it, a forged leader key refused; and its "Node certificates": the certificates made and nodes
started on its config.

The blocks run with bash from an empty directory, the virtual environment's ``bin`` first on the
PATH. The only change made to their text: the fixed ports they name (etcd's 2379 and 2380, the
nodes' 9001 to 9003) become free ones, since other servers may run on this machine. Whatever
the blocks started is killed at the end, should a block have failed before its stop.
"""

from __future__ import annotations

import os
import signal
from contextlib import suppress
from pathlib import Path

import pytest

from sowdb import testing
from sowdb.testing.cluster import TOPICS, cluster_status, until
from sowdb.testing.etcd import free_ports, start_etcd
from tests.doc_pages import blocks, run_block

pytestmark = pytest.mark.readme

PORTS = (2379, 2380, 9001, 9002, 9003)


def test_running_a_cluster_runs_as_written(tmp_path: Path) -> None:
    # the page's title is "Running a cluster" too, so its blocks are the whole page's: the
    # section's are the first four ("Securing etcd" follows)
    start, look, failover, stop = blocks("cluster.md", "Running a cluster")[:4]
    (readme,) = blocks("README.md", "Running a cluster")
    ports = dict(zip(PORTS, free_ports(len(PORTS)), strict=True))

    def run(block: str) -> str:
        for fixed, free in ports.items():
            block = block.replace(f"127.0.0.1:{fixed}", f"127.0.0.1:{free}")
        done = run_block(block, f"127.0.0.1:{ports[9001]}", cwd=tmp_path)
        assert done.returncode == 0, f"{block}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout + done.stderr

    try:
        run(start)
        shown = run(look)
        n1 = f"127.0.0.1:{ports[9001]}"
        assert f"n1    {n1}  primary" in shown
        assert shown.count("replica") >= 2
        assert "published 1 message" in shown
        assert f"write to the primary n1 at {n1}" in shown
        assert "node n1: primary, epoch " in shown
        assert ", applied bookmark 1, lag 0; followers: n2 lag 0, n3 lag 0" in shown
        assert "published 1 message" in run(readme)
        shown = run(failover)
        assert "primary" in shown
        assert '"orderId":1' in shown.replace(" ", "")
        assert '"orderId":3' in shown.replace(" ", "")
        run(stop)
    finally:
        for pid_file in (tmp_path / "cluster").glob("*.pid"):
            with suppress(ValueError, ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_securing_etcd_runs_as_written(tmp_path: Path) -> None:
    """docs/cluster.md's "Securing etcd": etcd with TLS, client certificates and a role limited to
    the cluster's prefix; a node on it (no SECURITY RISK warning); a forged leader key refused,
    without a certificate and with one of a user without the role; the stop."""
    make, start, forge, stop = blocks("cluster.md", "Securing etcd")
    ports = dict(zip(PORTS[:3], free_ports(3), strict=True))
    node = f"127.0.0.1:{ports[9001]}"

    def run(block: str) -> str:
        for fixed, free in ports.items():
            block = block.replace(f"127.0.0.1:{fixed}", f"127.0.0.1:{free}")
        done = run_block(block, node, cwd=tmp_path)
        assert done.returncode == 0, f"{block}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout + done.stderr

    try:
        run(make)
        run(start)
        log = (tmp_path / "secure" / "n1.log").read_text()
        assert "SECURITY RISK" not in log, log
        shown = run(forge)
        assert "context deadline exceeded" in shown
        assert "etcdserver: permission denied" in shown
        assert f'{{"node": "n1", "advertise": "{node}"}}' in shown
        assert f"n1    {node}  primary" in shown
        run(stop)
    finally:
        for pid_file in (tmp_path / "secure").glob("*.pid"):
            with suppress(ValueError, ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_node_certificates_are_made_and_configured_as_written(tmp_path: Path) -> None:
    """docs/cluster.md's "Node certificates": its block makes the CA and the nodes'
    certificates, and its config (with the test's etcd, a short lease and a topic) starts two
    nodes that replicate over the peer port, with no token and no warning."""
    (make,) = blocks("cluster.md", "Node certificates")
    (config,) = blocks("cluster.md", "Node certificates", lang="toml")
    done = run_block(make, "", cwd=tmp_path)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "DNS:n2" in done.stdout
    etcd = start_etcd(tmp_path / "etcd", secured=False)  # the section's config: plain etcd
    try:
        toml = config.replace('["http://127.0.0.1:2379"]', f'["{etcd.url}"]') + 'lease_ttl = "2s"\n' + TOPICS
        (tmp_path / "cluster.toml").write_text(toml)
        flags = ("--advertise", "127.0.0.1:0")
        with (
            testing.start(tmp_path / "n1", "--node", "n1", *flags, config=tmp_path / "cluster.toml") as n1,
            testing.start(tmp_path / "n2", "--node", "n2", *flags, config=tmp_path / "cluster.toml") as n2,
        ):
            until(
                lambda: (
                    [n.node for n in cluster_status(n1.target)] == ["n1", "n2"]
                    or [n.node for n in cluster_status(n2.target)] == ["n2", "n1"]
                ),
                30,
            )
            for node in (n1, n2):
                assert "serves the nodes on 127.0.0.1:" in node.output
                assert "no node certificates" not in node.output
    finally:
        etcd.stop()
