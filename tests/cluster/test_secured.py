"""A secured cluster replicates (issue 38, finding 1): with ``[security]`` TLS on and node
certificates (issue 40), a replica dials its primary's peer port over mutual TLS (trusting
``[cluster] ca``, with no token), so a ``sync`` primary's acknowledged writes are on its replica
and survive a kill -9. A replica that cannot follow (here: it does not trust the primary's
certificate) says so in ``ClusterStatus`` and in ``sow cluster`` instead of reporting itself at
lag 0."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sowdb import testing
from sowdb.testing.pki import Certs
from sowdb_api.v1 import admin_pb2
from sowdb_client import Client, SowdbError, Tls
from tests.cluster.conftest import EtcdServer
from tests.cluster.support import TTL, node_config, secure_config, until
from tests.support import sow

TOKEN = "replication-secret"


def secured_config(tmp_path: Path, etcd: EtcdServer, certs: Certs, *, ca: str = "ca.pem") -> Path:
    """The cluster's config with TLS, an admin user of :data:`TOKEN`, ``certs[ca]`` as
    ``[cluster] ca`` and node certificates for n1 and n2 (:func:`~tests.cluster.support.secure_config`)."""
    config = node_config(tmp_path, etcd)
    secure_config(config, certs, TOKEN, ca=ca, node_certs=True)
    certs.node("n1")
    certs.node("n2")
    return config


def me(c: Client) -> admin_pb2.ClusterNode:
    try:
        return c.cluster_status()[0]
    except SowdbError:
        return admin_pb2.ClusterNode(role="down")


@contextmanager
def two_nodes(config: Path, certs: Certs) -> Iterator[tuple[testing.Sowd, Client, testing.Sowd, Client]]:
    """n1 and n2 started on ``config`` (no replication token: the nodes have certificates),
    once n1 leads; each with an admin's client over TLS."""
    env = {k: v for k, v in os.environ.items() if k != "SOWDB_CLUSTER_TOKEN"}
    tls = Tls(ca=certs["ca.pem"])
    flags = ("--advertise", "127.0.0.1:0")
    primary = testing.start(config.parent / "n1", "--node", "n1", *flags, config=config, env=env)
    replica = testing.start(config.parent / "n2", "--node", "n2", *flags, config=config, env=env)
    try:
        with Client(primary.target, token=TOKEN, tls=tls) as p, Client(replica.target, token=TOKEN, tls=tls) as r:
            until(lambda: me(p).role == "primary", TTL + 20)
            yield primary, p, replica, r
    finally:
        primary.stop()
        replica.stop()


def test_a_secured_sync_cluster_replicates_and_its_acknowledged_writes_survive_a_kill(
    tmp_path: Path, etcd: EtcdServer
) -> None:
    certs = Certs(tmp_path / "pki")
    with two_nodes(secured_config(tmp_path, etcd, certs), certs) as (primary, p, _, r):
        until(lambda: me(r).following, TTL + 20)
        ack = p.publish("orders", [{"id": i} for i in range(5)])
        assert me(r).applied_bookmark == ack.last_bookmark  # sync: held by the replica when acknowledged
        assert [n.node for n in p.cluster_status()] == ["n1", "n2"]
        primary.kill()
        until(lambda: me(r).role == "primary", TTL + 20)
        assert sorted(rec.json()["id"] for rec in r.sow("orders").records()) == list(range(5))


def test_a_replica_that_cannot_follow_says_so_instead_of_lag_0(tmp_path: Path, etcd: EtcdServer) -> None:
    certs = Certs(tmp_path / "pki")
    config = secured_config(tmp_path, etcd, certs, ca="rogue.pem")  # not the CA that signed the primary's
    with two_nodes(config, certs) as (_, _, replica, r):
        until(lambda: me(r).follow_error, TTL + 20)
        row = me(r)
        assert row.role == "replica"
        assert not row.following
        assert "is no node 'n1' of this cluster" in row.follow_error  # its certificate is not the cluster CA's
        assert "does not follow" in replica.output
        shown = sow("cluster", "-server", replica.target, "-token", TOKEN, "-cacert", certs["ca.pem"])
        assert shown.returncode == 0, shown.stderr
        row_text = next(line for line in shown.stdout.splitlines() if line.split()[:1] == ["n2"])
        assert "not following" in row_text, shown.stdout
