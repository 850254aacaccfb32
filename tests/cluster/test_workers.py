"""A cluster whose nodes are ``sowd --workers 2`` groups (issue 41): each node's writer is the
node (it alone follows, replicates and is elected); its readers serve the node's port beside it,
fed by its writer, a replica's readers as the replica applies the primary's journal."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from sowdb.testing.cluster import Cluster
from sowdb.testing.holders import OWN_CONNECTION, connections, group_pids, holder
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import Client, SowdbError
from tests.cluster.conftest import EtcdServer
from tests.cluster.support import until

SOW = "/sowdb.v1.SowService/Sow"


def _reader_channel(target: str, banner: str) -> grpc.Channel:
    """A connection of its own to ``target`` that one of the group's readers holds."""
    port = int(target.rsplit(":", 1)[1])
    writer, readers = group_pids(banner)
    for _ in range(64):
        mine = connections(port)
        channel = grpc.insecure_channel(target, options=OWN_CONNECTION)
        grpc.channel_ready_future(channel).result(timeout=30)
        new = connections(port) - mine
        if len(new) == 1 and holder(port, new.pop(), [writer, *readers]) in readers:
            return channel
        channel.close()
    raise AssertionError("the kernel never gave a reader a connection")


def _sow(channel: grpc.Channel, timeout: float = 30) -> list[int]:
    call = channel.unary_stream(
        SOW, request_serializer=pb.SowRequest.SerializeToString, response_deserializer=pb.SowResponse.FromString
    )
    responses = call(pb.SowRequest(topic="orders"), timeout=timeout)
    return sorted(r.bookmark for resp in responses for r in resp.records.records)


def _follow(channel: grpc.Channel) -> list[int]:
    """The bookmarks a subscription to ``orders`` on ``channel`` receives, as they come (a thread)."""
    call = channel.unary_stream(
        "/sowdb.v1.SowService/Subscribe",
        request_serializer=pb.SubscribeRequest.SerializeToString,
        response_deserializer=pb.SubscribeResponse.FromString,
    )(pb.SubscribeRequest(topic="orders"))
    got: list[int] = []
    placed = threading.Event()

    def read() -> None:
        with contextlib.suppress(grpc.RpcError):  # cancelled when the channel closes
            for response in call:
                placed.set()
                got.extend(r.bookmark for r in response.publish.records)

    threading.Thread(target=read, daemon=True).start()
    assert placed.wait(30), "the subscription was not placed"
    return got


@pytest.fixture
def groups(tmp_path: Path, etcd: EtcdServer) -> Iterator[Cluster]:
    c = Cluster(tmp_path, etcd, server='record_store = "arena"')
    try:
        yield c
    finally:
        c.stop()


def _two_groups(cluster: Cluster) -> tuple[str, str]:
    """Nodes n1 and n2, each a group of two processes: (the primary, the replica)."""
    for name in ("n1", "n2"):
        cluster.start(name, "--workers", "2")
    primary = cluster.primary()
    return primary, next(n for n in cluster.nodes if n != primary)


def test_a_replicas_readers_serve_what_it_applied_and_relay_writes_to_its_writer(groups: Cluster) -> None:
    primary, replica = _two_groups(groups)
    with Client(groups.nodes[primary].target) as c:
        c.publish("orders", [{"id": i} for i in range(40)])
        expected = sorted(r.bookmark for r in c.sow("orders"))
    until(lambda: groups.own(replica).applied_bookmark == 40)
    on_reader = _reader_channel(groups.nodes[replica].target, groups.nodes[replica].banner)
    until(lambda: _sow(on_reader) == expected)  # from the replica's arena, fed by its writer
    with Client(groups.nodes[replica].target) as r, pytest.raises(SowdbError) as refused:
        r.publish("orders", [{"id": 99}])
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION  # the replica's writer, relayed or not
    assert refused.value.metadata["primary"] == groups.nodes[primary].target
    on_reader.close()


def test_the_primarys_writer_killed_restarts_its_group_and_no_acknowledged_write_is_lost(groups: Cluster) -> None:
    killed, other = _two_groups(groups)
    with Client(groups.nodes[killed].target) as c:
        c.publish("orders", [{"id": i} for i in range(20)])
    until(lambda: groups.own(other).applied_bookmark == 20)
    writer, _ = group_pids(groups.nodes[killed].banner)
    os.kill(writer, signal.SIGKILL)  # the node's writer: its supervisor restarts the group

    def banners() -> list[str]:
        return [line for line in groups.nodes[killed].lines if "sowd listening on" in line]

    until(lambda: len(banners()) == 2, within=60)  # the group came back on its port, with new processes
    # the group restarts within about a lease: either node may lead now, with every acknowledged write
    primary = groups.primary(within=60)
    with Client(groups.nodes[primary].target) as c:
        c.publish("orders", [{"id": 100}])
    until(lambda: all(groups.own(n).applied_bookmark == 21 for n in (killed, other)), within=30)
    on_reader = _reader_channel(groups.nodes[killed].target, banners()[-1])
    until(lambda: len(_sow(on_reader)) == 21)  # the restarted group's reader, fed by its new writer
    on_reader.close()


@pytest.fixture
def strict(tmp_path: Path, etcd: EtcdServer) -> Iterator[Cluster]:
    c = Cluster(tmp_path, etcd, ack="sync_strict", server='record_store = "arena"')  # never acknowledging alone
    try:
        yield c
    finally:
        c.stop()


def test_a_primarys_readers_show_nothing_its_sync_replica_has_not_acknowledged(strict: Cluster) -> None:
    groups = strict
    primary, replica = _two_groups(groups)
    with Client(groups.nodes[primary].target) as c:
        c.publish("orders", [{"id": i} for i in range(10)])
    until(lambda: groups.own(replica).applied_bookmark == 10)
    on_reader = _reader_channel(groups.nodes[primary].target, groups.nodes[primary].banner)
    assert len(_sow(on_reader)) == 10
    delivered = _follow(on_reader)  # a subscription the reader serves
    held, _ = group_pids(groups.nodes[replica].banner)
    os.kill(held, signal.SIGSTOP)  # the sync replica acknowledges nothing while stopped
    try:
        publisher = threading.Thread(
            target=lambda: Client(groups.nodes[primary].target).publish("orders", [{"id": 50}], timeout=60),
            daemon=True,
        )
        publisher.start()
        until(lambda: groups.own(primary).applied_bookmark == 11)  # applied by the primary's writer
        with pytest.raises(grpc.RpcError) as held_back:  # not shown before the replica acknowledges it
            _sow(on_reader, timeout=2)
        assert held_back.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert delivered == []  # nor delivered
    finally:
        os.kill(held, signal.SIGCONT)
    until(lambda: len(_sow(on_reader)) == 11, within=30)
    until(lambda: delivered == [11], within=30)
    publisher.join(60)
    on_reader.close()
