"""The Python SDK given a server list (SPEC §13, HA-5), against real processes: etcd and three
``sowd`` (the launcher of ``test_replication``), and the TCP fault proxy.

Checked: writes find the primary through a replica's refusal and find it again after a kill -9
(sync and asyncio clients); a publish whose acknowledgement was lost is sent again and applied
once (J-4 producer ids the SDK supplies); a subscription reading from the primary while it is
killed under sync-acknowledged load resumes on the new primary with strictly increasing
bookmarks, every acknowledged write delivered, and what it delivered equal to the final
journal; a subscription on a blackholed node moves to another within a bounded time (gRPC
keepalives); ``read_from="any"`` spreads reads.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from sowdb import testing
from sowdb.testing.faultproxy import fault_proxy
from sowdb_api.v1 import sow_pb2, sow_pb2_grpc
from sowdb_client import AsyncClient, Client, DataLossError, PublishAck, SowdbError
from tests.cluster.conftest import EtcdServer
from tests.cluster.support import TTL, Cluster, journal, until
from tests.doc_pages import blocks, run_block
from tests.support import sow

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def three(tmp_path: Path, etcd: EtcdServer) -> Iterator[Cluster]:
    c = Cluster(tmp_path, etcd)
    try:
        for name in ("n1", "n2", "n3"):
            c.start(name)
        yield c
    finally:
        c.stop()


def primary_last(cluster: Cluster) -> list[str]:
    """The nodes' addresses, the primary's last: a client must find it."""
    primary = cluster.primary()
    return [cluster.nodes[n].target for n in sorted(cluster.nodes, key=lambda n: n == primary)]


def ids(client: Client) -> set[int]:
    return {r.json()["id"] for r in client.sow("orders").records()}


def test_writes_find_the_primary_and_find_it_again_after_a_kill_9(three: Cluster) -> None:
    old = str(three.primary())
    with Client(primary_last(three)) as c:
        assert c.publish("orders", [{"id": i} for i in range(10)]).last_bookmark == 10  # via a replica's refusal
        assert c.sow_delete("orders", filter="/id = 0") == 1
        assert ids(c) == set(range(1, 10))  # reads go to the primary: it has them all, at once
        three.nodes[old].kill()
        ack = c.publish("orders", [{"id": 10}])  # waits for the new primary
        new = str(three.primary([n for n in three.nodes if n != old]))
        assert ack.count == 1
        assert c.cluster_status()[0].node == new
        assert ids(c) == set(range(1, 11))

    async def aio() -> set[int]:
        async with AsyncClient(",".join(three.nodes[n].target for n in three.nodes)) as a:
            await a.publish("orders", [{"id": 11}])
            return {r.json()["id"] for r in await a.sow("orders").records()}

    assert asyncio.run(aio()) == set(range(1, 12))


def test_a_publish_whose_ack_was_lost_is_sent_again_and_applied_once(tmp_path: Path, etcd: EtcdServer) -> None:
    """The replica is stopped (SIGSTOP), so the primary applies the request and holds its sync
    acknowledgement; the client's connection (through the proxy) is then cut: the client sends
    the request again to the same node (its second address), which answers that its producer
    had applied it. Without the producer id the SDK supplies, it would be applied twice."""
    two = Cluster(tmp_path, etcd)
    try:
        for name in ("n1", "n2"):
            two.start(name)
        primary = str(two.primary())
        replica = next(n for n in two.nodes if n != primary)
        until(lambda: len(two.status(primary)) == 2)  # the replica follows: a sync ack waits for it
        target = two.nodes[primary].target
        with (
            fault_proxy("127.0.0.1", int(target.rsplit(":", 1)[1])) as proxy,
            Client([f"127.0.0.1:{proxy.port}", target]) as c,
        ):

            def cut_once_applied() -> None:
                # journaled (a query would wait for the stopped replica: it shows no write the
                # replicas do not hold)
                until(lambda: two.own(primary).applied_bookmark == 50, within=30)
                proxy.set("cut")
                two.nodes[replica].proc.send_signal(signal.SIGCONT)

            cutter = threading.Thread(target=cut_once_applied)
            two.nodes[replica].proc.send_signal(signal.SIGSTOP)
            cutter.start()
            try:
                ack = c.publish("orders", [{"id": i} for i in range(50)])
            finally:
                two.nodes[replica].proc.send_signal(signal.SIGCONT)
                cutter.join()
            assert (ack.count, ack.duplicates) == (50, 50)  # applied by the first attempt, not again
            assert c.publish("orders", [{"id": 50}]).last_bookmark == 51  # the producer goes on
        two.stop()
        assert len(journal(tmp_path / primary)) == 51
    finally:
        two.stop()


def test_a_publish_retried_on_a_new_primary_after_a_kill_9_is_applied_once(tmp_path: Path, etcd: EtcdServer) -> None:
    """``sync_replicas = 2`` and n3 stopped: the primary applies the request, n2 holds it, and
    the acknowledgement waits for n3; the primary is then killed. n2, the most advanced, takes
    over; the client sends the request again there with the same J-4 producer sequence and is
    told it is a duplicate: the producer state travelled with the journal (HA-2, J-4)."""
    cluster = Cluster(tmp_path, etcd)
    # lease_ttl 5 s: a stopped follower holds a sync ack for up to lease_ttl (then the primary
    # acknowledges without it), the time this test has to kill the primary
    config = cluster.config.read_text().replace("sync_replicas = 1", "sync_replicas = 2")
    cluster.config.write_text(config.replace(f'lease_ttl = "{TTL}s"', 'lease_ttl = "5s"'))
    try:
        for name in ("n1", "n2", "n3"):
            cluster.start(name)
        old = str(cluster.primary())
        held, stopped = (n for n in cluster.nodes if n != old)
        until(lambda: len(cluster.status(old)) == 3)  # both replicas follow: an ack waits for both
        servers = [cluster.nodes[n].target for n in sorted(cluster.nodes, key=lambda n: n != old)]
        acks: list[PublishAck] = []
        cluster.nodes[stopped].proc.send_signal(signal.SIGSTOP)
        try:
            with Client(servers) as c:
                publisher = threading.Thread(
                    target=lambda: acks.append(c.publish("orders", [{"id": i} for i in range(50)]))
                )
                publisher.start()
                until(lambda: cluster.own(held).applied_bookmark >= 50, within=30)
                cluster.nodes[old].kill()
                cluster.nodes[stopped].proc.send_signal(signal.SIGCONT)
                publisher.join(timeout=60)
        finally:
            cluster.nodes[stopped].proc.send_signal(signal.SIGCONT)
        new = str(cluster.primary([held, stopped]))
        assert acks, "the publish did not complete"
        assert (acks[0].count, acks[0].duplicates) == (50, 50), "applied again on the new primary"
        cluster.stop()
        published = [e for e in journal(tmp_path / new) if e[3] == "orders"]
        assert len(published) == 50
    finally:
        cluster.stop()


def test_a_subscription_resumes_on_the_new_primary_with_no_gap_and_no_duplicate(three: Cluster) -> None:
    old = str(three.primary())
    servers = [three.nodes[n].target for n in sorted(three.nodes, key=lambda n: n != old)]  # the primary first
    acknowledged: list[int] = []
    delivered: list[tuple[int, int]] = []
    stop = threading.Event()
    subscribed = threading.Event()
    errors: list[BaseException] = []

    def subscriber() -> None:
        try:
            with Client(servers) as c:
                for event in c.subscribe("orders"):
                    subscribed.set()
                    delivered.extend((r.bookmark, r.json()["id"]) for r in event.records)
                    if any(r.json()["id"] == -1 for r in event.records):
                        return
        except BaseException as exc:  # shown by the assertion below
            errors.append(exc)
            subscribed.set()

    def publisher(start: int) -> None:
        with Client(servers) as c:
            i = start
            while not stop.is_set():
                c.publish("orders", [{"id": n} for n in range(i, i + 20)])
                acknowledged.extend(range(i, i + 20))
                i += 20

    reader = threading.Thread(target=subscriber)
    reader.start()
    assert subscribed.wait(30)
    writers = [threading.Thread(target=publisher, args=(w * 1_000_000,)) for w in range(2)]
    for w in writers:
        w.start()
    until(lambda: len(acknowledged) >= 1000, within=60)
    three.nodes[old].kill()
    before = len(acknowledged)
    until(lambda: len(acknowledged) >= before + 400, within=TTL + 30)  # the writers found the new primary
    stop.set()
    for w in writers:
        w.join(timeout=60)
    with Client(servers) as c:
        c.publish("orders", [{"id": -1}])  # the end mark
    reader.join(timeout=60)
    assert not errors, errors
    assert not reader.is_alive()
    bookmarks = [b for b, _ in delivered]
    assert all(a < b for a, b in itertools.pairwise(bookmarks)), "a bookmark went back or came twice"
    assert set(acknowledged) <= {i for _, i in delivered}, "an acknowledged write was not delivered"
    new = str(three.primary([n for n in three.nodes if n != old]))
    three.stop()
    final = {(e[0], json.loads(e[5])["id"]) for e in journal(three.tmp_path / new) if e[3] == "orders" and e[5]}
    first = bookmarks[0]
    assert set(delivered) <= final, f"delivered but not in the final journal: {sorted(set(delivered) - final)[:5]}"
    assert {e for e in final if e[0] >= first} <= set(delivered), "a gap: in the journal, never delivered"


def test_an_asyncio_subscription_moves_on_when_its_node_dies(three: Cluster) -> None:
    primary = str(three.primary())
    replica = next(n for n in three.nodes if n != primary)
    servers = [three.nodes[n].target for n in sorted(three.nodes, key=lambda n: n != replica)]  # the replica first

    async def follow() -> list[int]:
        seen: list[int] = []
        async with AsyncClient(servers, read_from="any") as c:
            with Client(three.nodes[primary].target) as w:
                async for event in c.subscribe("orders"):
                    if event.kind == "subscribed":
                        w.publish("orders", [{"id": 1}])
                    seen.extend(r.json()["id"] for r in event.records)
                    if seen == [1]:
                        three.nodes[replica].kill()  # the node of the subscription
                        w.publish("orders", [{"id": 2}])
                    if 2 in seen:
                        return seen
        return seen

    assert asyncio.run(asyncio.wait_for(follow(), 60)) == [1, 2]


def test_a_subscription_on_a_blackholed_node_moves_to_another(tmp_path: Path, etcd: EtcdServer) -> None:
    two = Cluster(tmp_path, etcd)
    try:
        for name in ("n1", "n2"):
            two.start(name)
        primary = str(two.primary())
        replica = next(n for n in two.nodes if n != primary)
        port = int(two.nodes[replica].target.rsplit(":", 1)[1])
        with fault_proxy("127.0.0.1", port) as proxy:
            servers = [f"127.0.0.1:{proxy.port}", two.nodes[primary].target]
            seen: list[int] = []
            arrived = threading.Event()

            def subscriber() -> None:
                with Client(servers, read_from="any", keepalive=1.0) as c:
                    for event in c.subscribe("orders"):
                        seen.extend(r.json()["id"] for r in event.records)
                        arrived.set()
                        if 2 in seen:
                            return

            reader = threading.Thread(target=subscriber, daemon=True)
            reader.start()
            with Client(two.nodes[primary].target) as w:
                until(lambda: (w.publish("orders", [{"id": 1}]), arrived.wait(0.5))[1], within=30)
                proxy.set("blackhole")
                started = time.monotonic()
                w.publish("orders", [{"id": 2}])
                reader.join(timeout=30)
            assert not reader.is_alive(), "the subscription stayed on the blackholed node"
            assert time.monotonic() - started < 15  # keepalive 1 s: noticed in ~2 s, then moved
            assert sorted(set(seen)) == [1, 2]
            assert len(seen) == len(set(seen)), f"delivered twice: {seen}"
            proxy.set("forward")
    finally:
        two.stop()


def test_read_from_any_spreads_reads_and_a_bad_list_is_refused(three: Cluster) -> None:
    servers = primary_last(three)
    with Client(servers) as c:
        c.publish("orders", [{"id": 1}])
    until(lambda: all(three.own(n).applied_bookmark == 1 for n in three.nodes))
    with Client(servers, read_from="any") as c:
        answered = {c.cluster_status()[0].node for _ in range(3)}
    assert answered == {"n1", "n2", "n3"}
    with pytest.raises(ValueError, match="port"):
        Client("127.0.0.1:9007,127.0.0.1:99999")
    with Client("127.0.0.1:1,127.0.0.1:2", failover_timeout=1) as c, pytest.raises(SowdbError) as refused:
        c.publish("orders", [{"id": 1}])
    assert "failover_timeout" in refused.value.message


DOC_SERVERS = "127.0.0.1:9101,127.0.0.1:9102,127.0.0.1:9103"


def test_the_cluster_page_client_blocks_and_the_cli_take_a_server_list(three: Cluster) -> None:
    """docs/cluster-design.md's blocks as written (the addresses replaced), then the CLI's
    ``SOW_SERVER`` list for a subscription, and a bad list refused as a usage error."""
    servers = ",".join(primary_last(three))
    heading = "Clients: a list of servers (HA-5)"
    (code,) = blocks("cluster-design.md", heading, lang="python")
    ran = subprocess.run(
        [sys.executable, "-c", code.replace(DOC_SERVERS, servers)], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    assert "publish [{'id': 1}]" in ran.stdout.splitlines()
    (commands,) = blocks("cluster-design.md", heading)
    shown = run_block(commands, servers, address=DOC_SERVERS)
    assert shown.returncode == 0, shown.stderr  # the publish went to the primary, found through a replica
    records = [json.loads(line) for line in shown.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["id"] for r in records) == [1, 2], shown.stdout  # after the publish's summary
    followed = sow("-server", servers, "subscribe", "-topic", "orders", "-bookmark", "0", "-count", "2")
    assert [json.loads(line)["id"] for line in followed.stdout.splitlines()] == [1, 2], followed.stderr
    refused = sow("-server", "h1,h2:99999", "ping")
    assert refused.returncode == 2
    assert "h2:99999" in refused.stderr


def sow_calls(target: str) -> tuple[int, int]:
    """(SowService/Sow calls, of them refused FAILED_PRECONDITION) as the node at ``target`` counts them."""
    with Client(target) as c:
        for r in c.stats().server.rpcs:
            if r.rpc == "SowService/Sow":
                return r.calls, r.errors.get("FAILED_PRECONDITION", 0)
    return 0, 0


def test_a_primary_read_never_trusts_a_stale_primary(cluster: Cluster) -> None:
    """Issue 38, finding 4: clients of a server list (sync and asyncio, read_from="primary") that
    last saw n1 lead read after a switchover to n2. n1, a replica now, refuses each read naming n2
    (as it refuses a write), and the clients read from n2; before, n1 answered them as a replica."""
    n1 = cluster.primary_and_replica()
    n2 = cluster.nodes["n2"].target
    with Client([n1, n2]) as c, asyncio.Runner() as runner:
        a = AsyncClient([n1, n2])
        c.publish("orders", [{"id": 1}])
        assert ids(c) == {1}  # from n1, the primary: both clients know it leads

        async def aio_ids() -> set[int]:
            return {r.json()["id"] for r in await a.sow("orders").records()}

        assert runner.run(aio_ids()) == {1}
        done = testing.run("switchover", "--server", n1, "--to", "n2", timeout=120)
        assert done.returncode == 0, done.stderr
        until(lambda: cluster.own("n1").role == "replica" and cluster.own("n1").following)
        before_n1, before_n2 = sow_calls(n1), sow_calls(n2)
        assert ids(c) == {1}
        assert runner.run(aio_ids()) == {1}
        after_n1, after_n2 = sow_calls(n1), sow_calls(n2)
        runner.run(a.close())
        assert after_n2[0] - before_n2[0] == 2  # both reads were served by the primary
        assert after_n1[0] - before_n1[0] == after_n1[1] - before_n1[1] == 2  # n1 refused both
    raw = sow_pb2.SowRequest(topic="orders")
    with grpc.insecure_channel(n1) as channel, pytest.raises(grpc.RpcError) as refused:
        list(sow_pb2_grpc.SowServiceStub(channel).Sow(raw, metadata=(("sowdb-read-from", "primary"),), timeout=10))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert n2 in (refused.value.details() or "")


def _async_pair_holding_ten(two: Cluster) -> list[str]:
    """n1 leading and n2 following, both holding bookmarks 1..10 (ids 0..9); their addresses."""
    two.start("n1")
    assert two.primary() == "n1"
    two.start("n2")
    until(lambda: len(two.status("n1")) == 2)
    servers = [two.nodes["n1"].target, two.nodes["n2"].target]
    with Client(servers) as c:
        c.publish("orders", [{"id": i} for i in range(10)])
    until(lambda: two.own("n2").applied_bookmark >= 10)
    return servers


def test_an_async_failover_never_lets_a_resumed_subscription_skip_the_new_primarys_writes(
    tmp_path: Path, etcd: EtcdServer
) -> None:
    """Under ``async`` a primary shows its subscribers what no replica holds yet. Killed, its
    successor writes its own entries at those bookmarks, acknowledged to their publishers. A
    subscription that resumed after its last bookmark would silently skip them (issue 38 saw
    1,309 and 7,093 such records): it must end with DATA_LOSS ``SUBSCRIPTION_FORKED`` instead."""
    two = Cluster(tmp_path, etcd, ack="async")
    try:
        servers = _async_pair_holding_ten(two)
        delivered: list[tuple[int, int]] = []
        outcome: list[object] = []

        def subscriber() -> None:
            try:
                with Client(servers) as c:
                    for event in c.subscribe("orders", bookmark="0"):
                        delivered.extend((r.bookmark, r.json()["id"]) for r in event.records)
                        if any(i == -1 for _, i in delivered):
                            outcome.append("went on")
                            return
            except SowdbError as exc:
                outcome.append(exc)

        two.nodes["n2"].stop()  # down while n1 acknowledges alone (a paused one still reads its socket)
        reader = threading.Thread(target=subscriber)
        reader.start()
        with Client(two.nodes["n1"].target) as c:  # acknowledged by n1 alone: bookmarks 11..30
            c.publish("orders", [{"id": 100 + i} for i in range(20)])
        until(lambda: any(b >= 30 for b, _ in delivered), within=30)
        two.nodes["n1"].kill()
        # back on its address, with bookmarks 1..10 only, and alone: it leads
        two.nodes["n2"] = testing.start(
            tmp_path / "n2", "--node", "n2", "--listen", servers[1], "--advertise", "127.0.0.1:0", config=two.config
        )
        two.started.append(("n2", two.nodes["n2"]))
        assert two.nodes["n2"].target == servers[1], two.nodes["n2"].banner
        until(lambda: two.own("n2").role == "primary", within=TTL + 30)
        with Client(servers) as c:  # its own bookmarks 11..40, acknowledged (a list: it retries)
            c.publish("orders", [{"id": 200 + i} for i in range(30)])
            c.publish("orders", [{"id": -1}])
        reader.join(timeout=60)
        assert not reader.is_alive()
        assert outcome, "the subscription ended with neither an error nor the end mark"
        error = outcome[0]
        assert isinstance(error, DataLossError), f"went on past the new primary's writes: {delivered[-5:]}"
        assert error.reason == "SUBSCRIPTION_FORKED"
        assert "bookmark 30" in error.message
        assert not any(i >= 200 for _, i in delivered), "delivered the new primary's entries after others"
        again: list[int] = []  # subscribed again: the cluster's history, shown by the new primary
        with Client(servers) as c:
            for event in c.subscribe("orders", bookmark="0", timeout=30):
                again.extend(r.json()["id"] for r in event.records)
                if -1 in again:
                    break
        assert again == [*range(10), *range(200, 230), -1]
    finally:
        two.stop()


def test_a_replica_promoted_under_async_shows_its_subscribers_its_own_writes(tmp_path: Path, etcd: EtcdServer) -> None:
    """A replica's delivery gate follows the points its primary ships; promoted under ``async``
    (which acknowledges alone), it must open it. It once stayed shut at the last shipped point,
    so the new primary's subscribers never saw a write it acknowledged."""
    two = Cluster(tmp_path, etcd, ack="async")
    try:
        servers = _async_pair_holding_ten(two)
        two.nodes["n1"].kill()
        until(lambda: two.own("n2").role == "primary", within=TTL + 30)
        got: list[int] = []
        with Client(servers) as c:
            c.publish("orders", [{"id": 10}])
            for event in c.subscribe("orders", bookmark="0", timeout=20):
                got.extend(r.json()["id"] for r in event.records)
                if 10 in got:
                    break
        assert got == list(range(11))
    finally:
        two.stop()
