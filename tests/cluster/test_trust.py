"""A cluster that can be trusted (issue 40): nodes prove who they are with certificates, and
nothing is followed on etcd's word alone.

The attacks of the issue's hostile probe, each against real ``sowd`` processes on a real etcd:
a forged leader key pointing at an attacker's gRPC server (by a party with etcd access but no
node certificate: nobody follows it, nothing forged is applied, the refusal is counted); a
forged epoch (10⁹) on a cluster without node certificates (refused by its epoch); a fake
follower ``n9`` reporting bookmark 10¹² (never in the sync set); a token user calling Follow or
CopyCheckpoint (refused); a node presenting another node's certificate (refused).
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sowdb.testing.pki import Certs
from sowdb_api.v1 import replication_pb2 as pb
from sowdb_api.v1 import replication_pb2_grpc as pb_grpc
from sowdb_client import Client, Tls
from tests.cluster.conftest import EtcdServer
from tests.cluster.support import Cluster, journal, sync_record, until

TOKEN = "admin-secret"
FORGED_EPOCH = 10**9
FORGED = b'{"id":666}'


class Attacker:
    """A gRPC server of the attacker's that plays a primary: every Follow call gets frames of a
    forged record at epoch ``epoch`` (what the issue's probe made every node apply)."""

    def __init__(self, credentials: grpc.ServerCredentials | None = None, epoch: int = FORGED_EPOCH) -> None:
        self.calls = 0
        self.epoch = epoch
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        handler = grpc.stream_stream_rpc_method_handler(
            self._follow,
            request_deserializer=pb.FollowRequest.FromString,
            response_serializer=pb.FollowResponse.SerializeToString,
        )
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("sowdb.v1.ReplicationService", {"Follow": handler}),)
        )
        address = "127.0.0.1:0"
        port = (
            self.server.add_insecure_port(address)
            if credentials is None
            else self.server.add_secure_port(address, credentials)
        )
        self.target = f"127.0.0.1:{port}"
        self.server.start()

    def _follow(self, requests: Iterator[pb.FollowRequest], context: Any) -> Iterator[pb.FollowResponse]:
        self.calls += 1
        hello = next(requests)
        at = hello.applied_bookmark + 1
        entry = pb.ReplicatedEntry(
            bookmark=at, timestamp_us=int(time.time() * 1e6), operation=1, topic="orders", sow_key="666", data=FORGED
        )
        history = [pb.EpochStart(epoch=self.epoch, first_bookmark=at, node="evil")]
        yield pb.FollowResponse(epoch=self.epoch, last_bookmark=at, epochs=history, clock_us=entry.timestamp_us)
        while context.is_active():
            yield pb.FollowResponse(epoch=self.epoch, last_bookmark=at, entries=[entry], clock_us=entry.timestamp_us)
            time.sleep(0.2)

    def stop(self) -> None:
        self.server.stop(0)


@contextmanager
def forged_leader(etcd: EtcdServer, record: dict[str, str], seconds: float) -> Iterator[None]:
    """``/sowdb/t/leader`` overwritten with ``record`` under a lease of the attacker's (an
    ``etcdctl put --lease``: whoever has etcd access can), for ``seconds``; then the lease is
    revoked, the key goes with it, and the nodes elect a primary again."""

    async def put() -> int:
        client = etcd.client(5.0)  # with the cluster's etcd credentials: the attacker has etcd access
        try:
            lease, _ = await client.grant(30)
            await client.put(b"/sowdb/t/leader", json.dumps(record).encode(), lease)
            return lease
        finally:
            await client.close()

    async def revoke(lease: int) -> None:
        client = etcd.client(5.0)  # with the cluster's etcd credentials: the attacker has etcd access
        try:
            await client.revoke(lease)
        finally:
            await client.close()

    lease = asyncio.run(put())
    try:
        deadline = time.monotonic() + seconds
        yield
        time.sleep(max(0.0, deadline - time.monotonic()))
    finally:
        asyncio.run(revoke(lease))


def refused(cluster: Cluster, name: str, certs: Certs | None = None) -> dict[str, float]:
    """Node ``name``'s ``sowdb_cluster_refused_total`` by reason, from its ``/metrics``."""
    found = re.search(r"metrics (https?://127\.0\.0\.1:\d+/metrics)", cluster.nodes[name].output)
    assert found, cluster.nodes[name].output
    context = ssl.create_default_context(cafile=certs["ca.pem"]) if certs is not None else None
    with urllib.request.urlopen(found.group(1), timeout=30, context=context) as resp:
        text = resp.read().decode()
    return {
        s.labels["reason"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "sowdb_cluster_refused_total"
    }


def secured(tmp_path: Path, etcd: EtcdServer, *, node_certs: bool = True) -> tuple[Cluster, Certs]:
    cluster = Cluster(tmp_path, etcd, server='metrics_listen = "127.0.0.1:0"')
    certs = Certs(tmp_path / "pki")
    cluster.secure(certs, TOKEN, node_certs=node_certs)
    return cluster, certs


def client(cluster: Cluster, certs: Certs, name: str) -> Client:
    return Client(cluster.nodes[name].target, token=TOKEN, tls=Tls(ca=certs["ca.pem"]))


def ids(cluster: Cluster, certs: Certs, name: str) -> list[int]:
    with client(cluster, certs, name) as c:
        return sorted(r.json()["id"] for r in c.sow("orders").records())


@pytest.fixture
def trusted(tmp_path: Path, etcd: EtcdServer) -> Iterator[tuple[Cluster, Certs]]:
    """n1 primary and n2 following it, with node certificates, one record acknowledged by both."""
    cluster, certs = secured(tmp_path, etcd)
    try:
        cluster.primary_and_replica()
        with client(cluster, certs, "n1") as c:
            c.publish("orders", [{"id": 1}])
        until(lambda: cluster.own("n2").applied_bookmark == 1)
        yield cluster, certs
    finally:
        cluster.stop()


def test_nodes_with_certificates_replicate_with_no_token_and_fail_over(trusted: tuple[Cluster, Certs]) -> None:
    cluster, certs = trusted
    assert cluster.env is None  # no SOWDB_CLUSTER_TOKEN: the certificate is the credential
    assert "serves the nodes on 127.0.0.1:" in cluster.nodes["n1"].output
    assert "no node certificates" not in cluster.nodes["n1"].output
    with client(cluster, certs, "n1") as c:
        ack = c.publish("orders", [{"id": 2}])
    assert cluster.own("n2").applied_bookmark == ack.last_bookmark  # sync: on the replica when acknowledged
    record = sync_record(cluster_etcd(cluster))
    assert record is not None
    assert record.nodes == ("n2",)
    cluster.nodes["n1"].kill()
    assert cluster.primary(["n2"]) == "n2"
    assert ids(cluster, certs, "n2") == [1, 2]
    assert refused(cluster, "n2", certs) == {}  # a primary that died is no peer refused


def cluster_etcd(cluster: Cluster) -> EtcdServer:
    return cluster.etcd


@pytest.mark.parametrize("presents", ["a stranger's certificate", "node n3's certificate"])
def test_a_forged_leader_key_is_followed_by_nobody(
    trusted: tuple[Cluster, Certs], etcd: EtcdServer, presents: str
) -> None:
    """An attacker with etcd access but no certificate of the node it names: its leader key
    points at its own server; n2 refuses it (counted), nothing forged lands anywhere, and once
    the attacker's lease goes the cluster has one primary and its replica follows again."""
    cluster, certs = trusted
    if presents == "a stranger's certificate":
        pem, key, reason = certs["rogue.pem"], certs["rogue.key"], "certificate"
    else:
        (pem, key), reason = certs.node("n3"), "name"
    attacker = Attacker(grpc.ssl_server_credentials([(Path(key).read_bytes(), Path(pem).read_bytes())]))
    try:
        with forged_leader(etcd, {"node": "n1", "advertise": attacker.target, "peer": attacker.target}, 4 * 2):
            until(lambda: refused(cluster, "n2", certs).get(reason, 0) >= 1, 30)
    finally:
        attacker.stop()
    assert attacker.calls == 0  # not one Follow call reached it
    primary = cluster.primary(["n1", "n2"], within=30)
    replica = "n2" if primary == "n1" else "n1"
    until(lambda: cluster.own(replica).following, 30)
    with client(cluster, certs, primary) as c:
        ack = c.publish("orders", [{"id": 2}])
    until(lambda: cluster.own(replica).applied_bookmark == ack.last_bookmark)
    assert ids(cluster, certs, "n1") == ids(cluster, certs, "n2") == [1, 2]
    cluster.stop()
    for name in ("n1", "n2"):
        assert FORGED not in [e[5] for e in journal(cluster.tmp_path / name)]


def test_without_node_certificates_a_forged_epoch_is_refused(tmp_path: Path, etcd: EtcdServer) -> None:
    """A cluster configured as before issue 40 still starts (with the warning), and follows
    no frame whose epoch is not its leader key's: the forged 10⁹ is refused, counted, and not
    applied (it would have made the replicas refuse the real primary ever after)."""
    cluster = Cluster(tmp_path, etcd, server='metrics_listen = "127.0.0.1:0"')  # a laptop cluster
    attacker = Attacker()
    try:
        cluster.primary_and_replica()
        assert "no node certificates" in cluster.nodes["n1"].output
        with Client(cluster.nodes["n1"].target) as c:
            c.publish("orders", [{"id": 1}])
        until(lambda: cluster.own("n2").applied_bookmark == 1)
        cluster.nodes["n2"].stop()  # n2 comes back to find the forged key: it dials the attacker
        with forged_leader(etcd, {"node": "n1", "advertise": attacker.target}, 2):
            cluster.start("n2")
            until(lambda: refused(cluster, "n2").get("epoch", 0) >= 1, 30)
        assert attacker.calls >= 1
        replica = "n2" if cluster.primary(["n1", "n2"], within=30) == "n1" else "n1"
        until(lambda: cluster.own(replica).following, 30)
    finally:
        attacker.stop()
        cluster.stop()
    for name in ("n1", "n2"):
        assert FORGED not in [e[5] for e in journal(cluster.tmp_path / name)]


def test_a_token_user_cannot_follow_nor_copy_the_store(trusted: tuple[Cluster, Certs]) -> None:
    """With node certificates an admin's token opens no replication call: on the client port
    it is refused, and the peer port asks for a certificate of the cluster's CA."""
    cluster, certs = trusted
    hello = pb.FollowRequest(node="n9", applied_bookmark=0)
    copy = pb.CopyCheckpointRequest(node="n9")
    with cluster.channel(cluster.nodes["n1"].target) as channel:
        stub = pb_grpc.ReplicationServiceStub(channel)
        for call in (
            lambda: next(iter(stub.Follow(iter([hello]), timeout=5, metadata=cluster.metadata))),
            lambda: next(iter(stub.CopyCheckpoint(copy, timeout=5, metadata=cluster.metadata))),
        ):
            with pytest.raises(grpc.RpcError) as refusal:
                call()
            assert refusal.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "node certificate" in (refusal.value.details() or "")
    peer = re.search(r"serves the nodes on (\S+) ", cluster.nodes["n1"].output)
    assert peer
    credentials = grpc.ssl_channel_credentials(Path(certs["ca.pem"]).read_bytes())  # no client certificate
    options = [("grpc.ssl_target_name_override", "n1")]
    with grpc.secure_channel(peer.group(1), credentials, options=options) as channel:
        with pytest.raises(grpc.RpcError) as refusal:
            next(iter(pb_grpc.ReplicationServiceStub(channel).Follow(iter([hello]), timeout=5)))
        assert refusal.value.code() == grpc.StatusCode.UNAVAILABLE
    assert refused(cluster, "n1", certs).get("token", 0) >= 2


def test_a_node_with_a_certificate_for_another_name_is_refused(trusted: tuple[Cluster, Certs]) -> None:
    """n3 started with n2's certificate and key (stolen, or a slip in a config): the primary
    refuses its stream (counted); with its own it follows."""
    cluster, certs = trusted
    own = cluster.config.read_text()
    stolen = cluster.tmp_path / "stolen.toml"
    stolen.write_text(own.replace("{node}.pem", "n2.pem").replace("{node}.key", "n2.key"))
    cluster.start("n3", config=stolen)
    until(lambda: refused(cluster, "n1", certs).get("name", 0) >= 1, 30)
    assert "n3" not in [n.node for n in cluster.status(cluster.primary())]
    assert not cluster.own("n3").following
    cluster.nodes["n3"].stop()
    cluster.start("n3")  # a loaded machine may have failed n1 over meanwhile: whoever leads
    until(lambda: "n3" in [n.node for n in cluster.status(cluster.primary(["n1", "n2"], within=30))], 30)


def test_a_fake_follower_never_enters_the_sync_set(tmp_path: Path, etcd: EtcdServer) -> None:
    """Without node certificates an admin's token may still open a Follow stream (as before
    issue 40): calling itself n9 and reporting bookmark 10¹² it is bounded by what it was sent
    and, with no member record in etcd, never counted: ``sync`` falls back to acknowledging
    alone rather than on its word."""
    cluster, certs = secured(tmp_path, etcd, node_certs=False)
    try:
        cluster.start("n1")
        assert cluster.primary() == "n1"
        with client(cluster, certs, "n1") as c:
            c.publish("orders", [{"id": 1}])
        reports: list[pb.FollowRequest] = [pb.FollowRequest(node="n9", applied_bookmark=0, advertise="127.0.0.1:1")]
        stop = threading.Event()

        def requests() -> Iterator[pb.FollowRequest]:
            yield reports[0]
            while not stop.wait(0.2):
                yield pb.FollowRequest(applied_bookmark=10**12)

        with cluster.channel(cluster.nodes["n1"].target) as channel:
            stream = pb_grpc.ReplicationServiceStub(channel).Follow(requests(), metadata=cluster.metadata)
            try:
                next(iter(stream))
                until(lambda: [n.node for n in cluster.status("n1")] == ["n1", "n9"])
                with client(cluster, certs, "n1") as c:
                    for i in range(2, 6):
                        c.publish("orders", [{"id": i}])
                        time.sleep(0.3)
                rows = cluster.status("n1")
                assert rows[1].applied_bookmark <= rows[0].applied_bookmark  # bounded by what it was sent
                assert not rows[1].sync
                record = sync_record(cluster_etcd(cluster))
                assert record is None or "n9" not in record.nodes
            finally:
                stop.set()
                stream.cancel()
        assert "follower n9 has no member record" in cluster.nodes["n1"].output
    finally:
        cluster.stop()
