"""The sync set in etcd (SPEC §13, HA-3): only a replica holding every acknowledged write may be
promoted, even when it is down and a lagging replica is alive.

The scenario the set exists for (``sync_replicas = 1``, two replicas): replica A holds the
acknowledged writes, replica B lags (paused); the primary and A die. B is then the most advanced
*live* node, and "most advanced wins" would promote it without the writes. With the set, B is not
a member and never takes the leader key: the cluster waits (writes UNAVAILABLE) until A is back,
and A is promoted with every acknowledged write.
"""

from __future__ import annotations

import time

import grpc
import pytest

from sowdb.cluster.dcs import SyncRecord
from sowdb_client import Client, SowdbError
from tests.cluster.conftest import EtcdServer
from tests.cluster.support import TTL, Cluster, publish_acknowledged, sync_record, until
from tests.cluster.test_lagging import paused


def refusal(target: str) -> str:
    """How ``target`` answers a write ("" when it accepts it)."""
    try:
        with Client(target) as c:
            c.publish("orders", [{"id": -1}], timeout=TTL + 8)
    except SowdbError as exc:
        return f"{exc.code.name}: {exc.message}"
    return ""


def test_a_lagging_replica_outside_the_sync_set_is_not_promoted_when_the_member_is_down(
    cluster: Cluster, etcd: EtcdServer
) -> None:
    for name in ("n1", "n2", "n3"):
        cluster.start(name)
    assert cluster.primary() == "n1"
    until(lambda: len(cluster.status("n1")) == 3)
    primary = cluster.nodes["n1"].target
    publish_acknowledged(primary, "orders", [{"id": 0}])
    first = until(lambda: (r := sync_record(etcd)) is not None and r.nodes and r, within=TTL + 15)
    assert isinstance(first, SyncRecord)
    assert first.leader == "n1"
    assert len(first.nodes) == 1
    lagging = first.nodes[0]  # paused, the member is replaced by the other, caught-up replica
    holder = next(n for n in ("n2", "n3") if n != lagging)
    acknowledged: list[int] = []
    with paused(cluster.nodes[lagging]):
        for i in range(1, 21):
            publish_acknowledged(primary, "orders", [{"id": i}], timeout=TTL + 8)
            acknowledged.append(i)
        # added first, the stalled one removed after (should the loaded machine stall the holder
        # too, the set empties and it rejoins once it holds every acknowledged write)
        until(lambda: (r := sync_record(etcd)) is not None and r.nodes == (holder,), within=TTL + 15)
        cluster.nodes["n1"].kill()
        cluster.nodes[holder].kill()
    # the lagging node runs again: it sees the leader key lapse, and does not take it
    until(lambda: "UNAVAILABLE" in refusal(cluster.nodes[lagging].target), within=TTL + 20)
    assert f"node {lagging} is not in the sync set ['{holder}']" in cluster.nodes[lagging].output
    watch_until = time.monotonic() + 2 * TTL
    while time.monotonic() < watch_until:  # a negative: it stays a replica for two more leases
        assert cluster.own(lagging).role == "replica"
        time.sleep(0.2)
    cluster.start(holder)  # the member comes back: it is promoted, with every acknowledged write
    assert cluster.primary([holder, lagging], within=TTL + 20) == holder
    with Client(cluster.nodes[holder].target) as c:
        held = {r.json()["id"] for r in c.sow("orders").records()}
    assert not set(acknowledged) - held
    last = publish_acknowledged(cluster.nodes[holder].target, "orders", [{"id": 100}]).last_bookmark
    until(lambda: cluster.own(lagging).applied_bookmark == last, within=TTL + 20)  # it follows the new primary


async def test_a_deposed_primary_cannot_write_the_sync_set(etcd: EtcdServer) -> None:
    """The set is written guarded by the leader key's create_revision: once the key is another's
    (a successor's epoch), the old primary's write is refused by etcd."""
    client = etcd.client()
    try:
        lease, _ = await client.grant(TTL)
        created, key = await client.create(b"/sowdb/t/g/leader", b"{}", lease)
        assert created
        assert key is not None
        assert await client.put_if(b"/sowdb/t/g/sync", b"mine", b"/sowdb/t/g/leader", key.create_revision)
        await client.revoke(lease)  # the key lapses; a successor takes it
        lease, _ = await client.grant(TTL)
        created, successor = await client.create(b"/sowdb/t/g/leader", b"{}", lease)
        assert created
        assert successor is not None
        assert not await client.put_if(b"/sowdb/t/g/sync", b"stale", b"/sowdb/t/g/leader", key.create_revision)
        found = await client.get(b"/sowdb/t/g/sync")
        assert found is not None
        assert found.value == b"mine"
    finally:
        await client.close()


def test_strict_keeps_a_stalled_member_and_sync_empties_the_set(cluster: Cluster, etcd: EtcdServer) -> None:
    """``sync``: with the only replica stalled, the set is emptied (logged) and the primary acks
    alone; ``sync_strict`` (same cluster, restarted with the other mode) keeps it and refuses."""
    cluster.start("n1")
    assert cluster.primary() == "n1"
    cluster.start("n2")
    primary = cluster.nodes["n1"].target
    publish_acknowledged(primary, "orders", [{"id": 0}])
    until(lambda: (r := sync_record(etcd)) is not None and r.nodes == ("n2",), within=TTL + 15)
    with paused(cluster.nodes["n2"]):
        publish_acknowledged(primary, "orders", [{"id": 1}], timeout=TTL + 8)
        record = sync_record(etcd)
        assert record is not None
        assert record.nodes == ()
        assert "the sync set is empty, acknowledging alone" in cluster.nodes["n1"].output
    until(lambda: (r := sync_record(etcd)) is not None and r.nodes == ("n2",), within=TTL + 15)
    for name in ("n2", "n1"):
        cluster.nodes[name].stop()
    cluster.config.write_text(cluster.config.read_text().replace('ack = "sync"', 'ack = "sync_strict"'))
    cluster.start("n1")
    cluster.start("n2")
    primary = cluster.nodes[str(cluster.primary(within=TTL + 20))].target
    replica = "n2" if primary == cluster.nodes["n1"].target else "n1"
    publish_acknowledged(primary, "orders", [{"id": 2}], timeout=TTL + 8)
    with paused(cluster.nodes[replica]):
        with Client(primary) as c, pytest.raises(SowdbError) as refused:
            c.publish("orders", [{"id": 3}], timeout=TTL + 8)
        assert refused.value.code == grpc.StatusCode.UNAVAILABLE
        record = sync_record(etcd)
        assert record is not None
        assert record.nodes == (replica,)


async def test_the_leader_key_is_taken_only_while_the_sync_set_is_as_eligibility_read_it(etcd: EtcdServer) -> None:
    """A node paused between judging its eligibility (by the set) and creating the leader key
    cannot act on a stale set: the create is guarded by the set's mod_revision."""
    client = etcd.client()
    try:
        await client.put(b"/sowdb/t/u/sync", b'{"epoch": 1, "leader": "a", "nodes": ["b"]}', 0)
        read = await client.get(b"/sowdb/t/u/sync")
        assert read is not None
        await client.put(b"/sowdb/t/u/sync", b'{"epoch": 1, "leader": "a", "nodes": ["c"]}', 0)  # changed since
        lease, _ = await client.grant(TTL)
        assert await client.create(b"/sowdb/t/u/leader", b"{}", lease, (b"/sowdb/t/u/sync", read.mod_revision)) == (
            False,
            None,
        )
        now = await client.get(b"/sowdb/t/u/sync")
        assert now is not None
        created, _ = await client.create(b"/sowdb/t/u/leader", b"{}", lease, (b"/sowdb/t/u/sync", now.mod_revision))
        assert created
        created, _ = await client.create(b"/sowdb/t/v/leader", b"{}", lease, (b"/sowdb/t/v/sync", 0))  # absent: 0
        assert created
    finally:
        await client.close()
