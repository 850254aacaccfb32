"""A cluster of real processes (SPEC §13): etcd and three ``sowd`` started by the one launcher,
each with its own data directory and port, advertising the address it bound.

Checked: a write to the primary is on both replicas with the same bookmarks and the same
journal, entry for entry; a write to a replica is FAILED_PRECONDITION naming the primary (in
the message and in ErrorInfo's metadata); ``kill -9`` of the primary under ``sync``
acknowledged load gives a new primary within the lease plus a few seconds, on which every
acknowledged write is (Jepsen's set check: acknowledged - read is empty); the old primary,
restarted, is a replica that refuses writes naming the new primary.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import grpc
import pytest

from sowdb import testing
from sowdb.auth import hash_token
from sowdb_api.v1 import data_pb2, data_pb2_grpc, replication_pb2, replication_pb2_grpc
from sowdb_client import Client, SowdbError
from tests.cluster.conftest import EtcdServer
from tests.cluster.support import TTL, Cluster, journal, node_config, until
from tests.support import sow


def follow_refusal(target: str, epoch: int = 0) -> tuple[grpc.StatusCode, str]:
    """How ``target`` refuses a follower that knows ``epoch``."""
    hello = replication_pb2.FollowRequest(node="other", epoch=epoch)
    with grpc.insecure_channel(target) as channel, pytest.raises(grpc.RpcError) as refused:
        next(iter(replication_pb2_grpc.ReplicationServiceStub(channel).Follow(iter([hello]), timeout=5)))
    return refused.value.code(), refused.value.details() or ""


def test_writes_replicate_entry_for_entry_and_replicas_refuse_writes(cluster: Cluster) -> None:
    for name in ("n1", "n2", "n3"):
        cluster.start(name)
    primary = str(cluster.primary())
    replicas = [n for n in cluster.nodes if n != primary]
    address = cluster.nodes[primary].target
    with Client(address) as c:
        ack = c.publish("orders", [{"id": i, "qty": i} for i in range(50)])
        assert c.sow_delete("orders", filter="/id = 7") == 1
    assert ack.last_bookmark == 50
    for name in replicas:
        until(lambda: all(cluster.own(n).applied_bookmark == 51 for n in replicas))
        with Client(cluster.nodes[name].target) as r:
            assert sorted(x.bookmark for x in r.sow("orders").records()) == sorted(
                x.bookmark for x in Client(address).sow("orders").records()
            )
            with pytest.raises(SowdbError) as refused:
                r.publish("orders", [{"id": 999}])
            assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
            assert address in refused.value.message
            assert refused.value.metadata["primary"] == address
            stage = data_pb2.StageWriteRequest(stage_id="s", topic="orders", complete=True)
            stage.messages.add(data=b'{"id": 998}')
            with grpc.insecure_channel(cluster.nodes[name].target) as channel, pytest.raises(grpc.RpcError) as staged:
                data_pb2_grpc.DataServiceStub(channel).StageWrite(iter([stage]), timeout=5)
            assert staged.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            code, message = follow_refusal(cluster.nodes[name].target)  # a replica streams nothing
            assert code == grpc.StatusCode.FAILED_PRECONDITION
            assert "is not the primary" in message
    rows = cluster.status(primary)
    assert [r.role for r in rows] == ["primary", "replica", "replica"]
    assert {r.node for r in rows} == {"n1", "n2", "n3"}
    shown = sow("-server", address, "cluster", "-format", "json")  # sow cluster: a node a line
    assert shown.returncode == 0, shown.stderr
    lines = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [(n["node"], n["role"], n["applied_bookmark"], n["lag"]) for n in lines] == [
        (primary, "primary", 51, 0),
        *sorted((name, "replica", 51, 0) for name in replicas),
    ]
    assert len({n["epoch"] for n in lines}) == 1
    assert lines[0]["epoch"] > 0
    cluster.stop()
    journals = [journal(cluster.tmp_path / name) for name in ("n1", "n2", "n3")]
    assert len(journals[0]) == 51
    assert journals[0] == journals[1] == journals[2]


def test_kill_9_of_the_primary_under_sync_load_loses_no_acknowledged_write(cluster: Cluster) -> None:
    for name in ("n1", "n2", "n3"):
        cluster.start(name)
    old = str(cluster.primary())
    survivors = [n for n in cluster.nodes if n != old]
    acknowledged: list[int] = []
    stop = threading.Event()

    def load(start: int) -> None:  # batches of 20 ids from `start`, one request in flight
        with Client(cluster.nodes[old].target) as c:
            i = start
            while not stop.is_set():
                try:
                    c.publish("orders", [{"id": n} for n in range(i, i + 20)])
                except SowdbError:
                    return  # the primary is gone: what was acknowledged is what counts
                acknowledged.extend(range(i, i + 20))
                i += 20

    writers = [threading.Thread(target=load, args=(w * 1_000_000,)) for w in range(4)]
    for w in writers:
        w.start()
    until(lambda: len(acknowledged) >= 2000)
    cluster.nodes[old].kill()
    killed = time.monotonic()
    for w in writers:
        w.join(timeout=30)
    stop.set()
    new = str(cluster.primary(survivors, within=TTL + 10))
    assert time.monotonic() - killed < TTL + 6
    with Client(cluster.nodes[new].target) as c:
        held = {x.json()["id"] for x in c.sow("orders").records()}
    lost = set(acknowledged) - held
    assert not lost, f"acknowledged writes lost in the failover: {sorted(lost)}"

    cluster.start(old)  # the old primary comes back: a replica now
    until(lambda: cluster.own(old).role == "replica" and cluster.own(old).epoch > 0)
    with Client(cluster.nodes[old].target) as r, pytest.raises(SowdbError) as refused:
        r.publish("orders", [{"id": -1}])
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert refused.value.metadata["primary"] == cluster.nodes[new].target
    # It follows the new primary, unless its journal has writes that never left it (then the new
    # primary refuses it as forked, and it says so: the fork cut is not built yet).
    with Client(cluster.nodes[new].target) as c:
        last = c.publish("orders", [{"id": -2}]).last_bookmark
    until(lambda: cluster.own(old).applied_bookmark == last or "journal forked" in cluster.nodes[old].output)


@pytest.mark.parametrize("ack", ["sync", "sync_strict"])
def test_a_primary_without_replicas_falls_back_to_async_or_refuses_with_sync_strict(
    tmp_path: Path, etcd: EtcdServer, ack: str
) -> None:
    config = node_config(tmp_path, etcd, ack)
    with testing.start(tmp_path / "n1", "--node", "n1", "--advertise", "127.0.0.1:0", config=config) as sowd:
        with Client(sowd.target) as c:
            until(lambda: c.cluster_status()[0].role == "primary")
            if ack == "sync":
                assert c.publish("orders", [{"id": 1}]).last_bookmark == 1
                epoch = c.cluster_status()[0].epoch
                assert follow_refusal(sowd.target, epoch=epoch + 1) == (  # it is the stale one
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"the follower knows epoch {epoch + 1}, newer than {epoch}",
                )
            else:
                with pytest.raises(SowdbError) as refused:
                    c.publish("orders", [{"id": 1}])
                assert refused.value.code == grpc.StatusCode.UNAVAILABLE
                assert "sync_strict" in refused.value.message
        status, output = sowd.stop()
    assert status == 0
    assert ("acknowledging alone" in output) == (ack == "sync")


def test_a_server_without_cluster_has_no_cluster_status(tmp_path: Path) -> None:
    with testing.start(tmp_path / "alone") as sowd, Client(sowd.target) as c:
        with pytest.raises(SowdbError) as refused:
            c.cluster_status()
        assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
        assert c.publish("orders", [{"orderId": 1, "symbol": "A"}]).last_bookmark == 1


def test_a_node_whose_journal_forked_cuts_it_at_the_fork_and_follows(cluster: Cluster) -> None:
    for name in ("n1", "n2", "n3"):
        cluster.start(name)
    assert cluster.primary() == "n1"
    with Client(cluster.nodes["n1"].target) as c:
        c.publish("orders", [{"id": i} for i in range(10)])
    until(lambda: all(cluster.own(n).applied_bookmark == 10 for n in ("n2", "n3")))
    cluster.nodes["n3"].stop()
    alone = testing.start(cluster.tmp_path / "n3", config=cluster.config.with_name("alone.toml"))
    with alone, Client(alone.target) as c:  # n3 writes 11..13 on its own: its journal forks after 10
        c.publish("orders", [{"id": i} for i in range(100, 103)])
    with Client(cluster.nodes["n1"].target) as c:  # id 101 sent again to the primary, as a client would
        assert c.publish("orders", [{"id": 10}, {"id": 101}]).last_bookmark == 12
    cluster.start("n3")
    status, output = cluster.nodes["n3"].stop(sig=0, timeout=30)  # refused: it finds the fork, stops
    assert status == 0
    assert "forked after bookmark 10" in output
    assert "shutting down at once" in output  # its calls are not waited for: it is cut at start
    cluster.start("n3")  # the cut: 11..13 go to the lost-writes file, then it follows
    until(lambda: cluster.own("n3").applied_bookmark == 12)
    assert cluster.own("n3").epochs == cluster.own("n1").epochs  # the cut dropped none it kept, adopted n1's
    path = cluster.tmp_path / "n3" / "lost-writes.jsonl"
    until(lambda: not (cluster.tmp_path / "n3" / "lost-writes.check").exists())  # checked once caught up
    lost = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(w["bookmark"], json.loads(w["data"])["id"], w["operation"], w["lost"]) for w in lost] == [
        (11, 100, "publish", True),
        (12, 101, "publish", False),  # the primary applied the same write at its bookmark 12
        (13, 102, "publish", True),
    ]
    assert lost[1]["applied_at"] == 12
    assert "2 are lost" in cluster.nodes["n3"].output
    with Client(cluster.nodes["n3"].target) as c:
        assert sorted(r.json()["id"] for r in c.sow("orders").records()) == [*range(11), 101]
    cluster.stop()
    assert journal(cluster.tmp_path / "n3") == journal(cluster.tmp_path / "n1")


def test_with_security_on_only_an_admin_may_follow(tmp_path: Path, etcd: EtcdServer) -> None:
    """The journal is every topic's: a follower without an admin's token is refused, and a
    replica given one (``SOWDB_CLUSTER_TOKEN``) follows."""
    token = "replication-secret"
    (tmp_path / "users.toml").write_text(
        f'[[user]]\nname = "repl"\ntoken_sha256 = "{hash_token(token)}"\nroles = ["ops"]\n'
    )
    config = node_config(tmp_path, etcd)
    security = f"""
[security]
users_file = "{tmp_path / "users.toml"}"

[[role]]
name = "ops"
read = [".*"]
write = [".*"]
admin = true
"""
    config.write_text(config.read_text() + security)
    flags = ("--advertise", "127.0.0.1:0")
    with testing.start(tmp_path / "n1", "--node", "n1", *flags, config=config) as primary:
        with Client(primary.target, token=token) as c:
            until(lambda: c.cluster_status()[0].role == "primary")
            c.publish("orders", [{"id": 1}])
        hello = replication_pb2.FollowRequest(node="spy", applied_bookmark=0)
        with grpc.insecure_channel(primary.target) as channel, pytest.raises(grpc.RpcError) as refused:
            next(iter(replication_pb2_grpc.ReplicationServiceStub(channel).Follow(iter([hello]), timeout=5)))
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        env = {**os.environ, "SOWDB_CLUSTER_TOKEN": token}
        replica = testing.start(tmp_path / "n2", "--node", "n2", *flags, config=config, env=env)
        with replica, Client(replica.target, token=token) as r:
            until(lambda: r.cluster_status()[0].applied_bookmark == 1)
