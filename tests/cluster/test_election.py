"""The election of HA-1 / HA-4 against a real etcd: one primary, failover with a rising epoch,
fencing by the primary's own deadline, and a clean switchover."""

from __future__ import annotations

import asyncio
import time

import pytest

from sowdb.cluster.dcs import ClusterView
from sowdb.cluster.election import Eligible, SwitchoverFailed
from sowdb.testing.faultproxy import fault_proxy
from tests.cluster.conftest import EtcdServer
from tests.cluster.support import TTL, Journal, Node, cluster_config


async def test_one_leader_among_three_candidates(etcd: EtcdServer) -> None:
    journal = Journal()
    nodes = [Node(cluster_config(etcd, name), journal) for name in ("a", "b", "c")]
    try:
        await journal.wait(lambda: journal.of("lead") and len({e.node for e in journal.of("follow")}) == 2)
        leaders = [n.election for n in nodes if n.election.is_leader]
        assert len(leaders) == 1
        assert leaders[0].may_acknowledge()
        for n in nodes:
            assert n.election.leader is not None
            assert n.election.leader.node == leaders[0].cluster.node
            assert n.election.leader.epoch == leaders[0].epoch
        journal.assert_no_overlap()
    finally:
        for n in nodes:
            await n.stop()


async def test_a_dead_leaders_key_lapses_and_another_takes_it_at_a_higher_epoch(etcd: EtcdServer) -> None:
    journal = Journal()
    nodes = {name: Node(cluster_config(etcd, name), journal) for name in ("a", "b", "c")}
    try:
        await journal.wait(lambda: journal.of("lead"))
        first = journal.of("lead")[0]
        killed = time.monotonic()
        await nodes.pop(first.node).stop(resign=False)  # its lease is left to lapse on etcd
        await journal.wait(lambda: journal.of("lead", after=killed))
        second = journal.of("lead", after=killed)[0]
        assert second.node != first.node
        assert second.epoch > first.epoch
        assert second.at - killed < 2 * TTL + 2, "the successor waited far longer than the lease"
        journal.assert_no_overlap()
    finally:
        for n in nodes.values():
            await n.stop()


async def test_a_partitioned_leader_stops_acknowledging_before_its_lease_lapses(etcd: EtcdServer) -> None:
    journal = Journal()
    with fault_proxy("127.0.0.1", etcd.port) as proxy:
        a = Node(cluster_config(etcd, "a", url=etcd.url.replace(str(etcd.port), str(proxy.port))), journal)
        await journal.wait(lambda: journal.of("lead", "a"))
        others = [Node(cluster_config(etcd, name), journal) for name in ("b", "c")]
        observer = etcd.client(timeout=1.0)
        lease = a.election.lease_id
        alive: list[tuple[float, int]] = []  # (time just before asking etcd, the lease's TTL left)

        async def sample() -> None:
            while True:
                before = time.monotonic()
                alive.append((before, await observer.remaining(lease)))
                await asyncio.sleep(0.05)

        sampler = asyncio.get_running_loop().create_task(sample())
        try:
            await journal.wait(lambda: len(journal.of("follow")) >= 2)
            proxy.set("blackhole")
            cut = time.monotonic()
            await journal.wait(lambda: journal.of("lead", after=cut) and journal.of("fenced", "a"))
            sampler.cancel()
            fenced = journal.of("fenced", "a")[0]
            successor = journal.of("lead", after=cut)[0]
            assert not a.election.may_acknowledge()
            # etcd itself still kept a's lease after a had stopped acknowledging
            assert any(t > fenced.at and ttl >= 0 for t, ttl in alive), (fenced, alive)
            assert fenced.at < successor.at
            assert successor.epoch > fenced.epoch
            journal.assert_no_overlap()
            proxy.set("forward")  # healed: the former primary follows the new one
            await journal.wait(lambda: a.election.leader is not None and a.election.leader.node == successor.node)
            assert not a.election.is_leader
        finally:
            sampler.cancel()
            await observer.close()
            for n in (a, *others):
                await n.stop()


async def test_a_paused_etcd_fences_the_leader_within_the_ttl_and_it_recovers(etcd: EtcdServer) -> None:
    journal = Journal()
    nodes = [Node(cluster_config(etcd, name), journal) for name in ("a", "b")]
    try:
        await journal.wait(lambda: journal.of("lead") and journal.of("follow"))
        leader = journal.of("lead")[0].node
        paused = time.monotonic()
        etcd.pause()
        await journal.wait(lambda: journal.of("fenced", leader))
        assert journal.of("fenced", leader)[0].at <= paused + TTL
        assert not any(n.election.may_acknowledge() for n in nodes)
        etcd.resume()
        resumed = time.monotonic()
        await journal.wait(lambda: journal.of("lead", after=resumed))
        assert sum(n.election.may_acknowledge() for n in nodes) == 1
        journal.assert_no_overlap()
    finally:
        etcd.resume()
        for n in nodes:
            await n.stop()


async def test_an_ineligible_node_never_takes_the_key(etcd: EtcdServer) -> None:
    journal = Journal()
    ready = asyncio.Event()

    def eligible(view: ClusterView) -> bool:
        return ready.is_set()

    b = Node(cluster_config(etcd, "b"), journal, eligible)
    a = Node(cluster_config(etcd, "a"), journal)
    try:
        await journal.wait(lambda: journal.of("lead", "a") and journal.of("follow", "b"))
        await a.stop()  # resigns: the key is free at once
        rounds = b.election.rounds
        await journal.wait(lambda: b.election.rounds >= rounds + 3)
        assert not b.election.is_leader
        assert not journal.of("lead", "b")
        ready.set()
        await journal.wait(lambda: journal.of("lead", "b"))
        assert journal.of("lead", "b")[0].epoch > journal.of("lead", "a")[0].epoch
        journal.assert_no_overlap()
    finally:
        for n in (a, b):
            await n.stop()


async def test_switchover_hands_over_with_the_epoch_rising(etcd: EtcdServer) -> None:
    journal = Journal()
    ready = {"a": True, "b": True, "c": False}

    def eligible(name: str) -> Eligible:
        def check(view: ClusterView) -> bool:
            return ready[name]

        return check

    a = Node(cluster_config(etcd, "a"), journal)
    await journal.wait(lambda: journal.of("lead", "a"))
    b, c = (Node(cluster_config(etcd, name), journal, eligible(name)) for name in ("b", "c"))
    try:
        await journal.wait(lambda: len(journal.of("follow")) >= 2)
        old = a.election.epoch
        with pytest.raises(SwitchoverFailed):  # c is not eligible: a keeps the key and acknowledges again
            await a.election.switchover("c", within=1.0)
        assert a.election.epoch == old
        assert a.election.may_acknowledge()
        new = await a.election.switchover("b", within=10.0)
        assert new > old
        assert b.election.epoch == new
        await journal.wait(lambda: b.election.may_acknowledge())
        assert not a.election.may_acknowledge()
        for n in (a, c):
            await journal.wait(lambda n=n: n.election.leader is not None and n.election.leader.epoch == new)  # type: ignore[misc]
        journal.assert_no_overlap()
    finally:
        for n in (a, b, c):
            await n.stop()
